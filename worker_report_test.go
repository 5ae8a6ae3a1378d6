package drover_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// answerLost is a real driver whose first batch of completions is applied and
// committed, and then answered with a connection error, as when the connection
// drops after the commit: the worker cannot tell whether it was applied.
type answerLost struct {
	driver.Driver
	mu    sync.Mutex
	calls int
	sent  []driver.CompleteParams
}

func (a *answerLost) JobCompleteManyErrs(ctx context.Context, params []driver.CompleteParams) []error {
	a.mu.Lock()
	a.calls++
	first := a.calls == 1
	a.sent = append(a.sent, params...)
	a.mu.Unlock()
	errs := a.Driver.JobCompleteManyErrs(ctx, params)
	if first {
		for i, err := range errs {
			if err != nil {
				panic("the first completion failed: " + err.Error())
			}
			errs[i] = errors.New("read tcp 127.0.0.1:5432: connection reset by peer")
		}
	}
	return errs
}

// outcomes records what a worker's observer is told.
type outcomes struct {
	finished chan string
	lost     chan int64
}

func (o *outcomes) Claimed(string, int)                                     {}
func (o *outcomes) Finished(_ *drover.Job, outcome string, _ time.Duration) { o.finished <- outcome }
func (o *outcomes) LeaseLost(j *drover.Job)                                 { o.lost <- j.ID }

// observedWorker starts a worker over drv whose one kind, "quick", returns
// result, and answers the client, the worker and what its observer is told.
func observedWorker(t *testing.T, drv driver.Driver, result any) (*drover.Client, *drover.Worker, *outcomes) {
	t.Helper()
	c, err := drover.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := drover.NewWorkers()
	drover.Register(ws, "quick", func(context.Context, *drover.Job, struct{}) (any, error) { return result, nil })
	obs := &outcomes{finished: make(chan string, 4), lost: make(chan int64, 4)}
	cfg := fastWorkerConfig(ws)
	cfg.Observer = obs
	return c, startWorker(t, c, cfg), obs
}

// wait returns once the worker recorded n outcomes (Finished), which it does
// after counting them in Stats.
func (o *outcomes) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		waitChan(t, o.finished, "a recorded outcome")
	}
}

// reported waits for the job's report to end: its outcome, or "lease lost".
func (o *outcomes) reported(t *testing.T) string {
	t.Helper()
	select {
	case got := <-o.finished:
		return got
	case <-o.lost:
		return "lease lost"
	case <-time.After(waitTimeout):
		t.Fatal("the job's report did not end")
		return ""
	}
}

// A local worker's completion carries no request_id; when its answer is lost
// after the commit, the retry finds the lease gone, sees the job succeeded at
// its attempt and counts it succeeded, once, not as a lost lease.
func TestWorkerCompletionAnswerLostAfterCommit(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		lossy := &answerLost{Driver: newClient(t, kind, nil).Driver()}
		c, w, obs := observedWorker(t, lossy, "ok")
		id := enqueue(t, c, "quick", nil, nil).ID
		if got := obs.reported(t); got != "succeeded" {
			t.Fatalf("outcome %q, want succeeded", got)
		}
		if s, l := w.Stats().Succeeded.Load(), w.Stats().LeaseLost.Load(); s != 1 || l != 0 {
			t.Errorf("stats: succeeded %d, lease lost %d; want 1 and 0", s, l)
		}
		j := getJob(t, c, id)
		if j.Status != drover.StatusSucceeded || j.Attempt != 1 || string(j.Result) != `"ok"` {
			t.Errorf("job %+v, want succeeded at attempt 1 with its result", j)
		}
		evs, err := c.Events(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.Type == lifecycle.EventSucceeded {
				n++
				if e.RequestID != "" {
					t.Errorf("succeeded event's request_id %q, want none from a local worker", e.RequestID)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d succeeded events, want 1: %+v", n, evs)
		}
		lossy.mu.Lock()
		defer lossy.mu.Unlock()
		if lossy.calls != 2 {
			t.Errorf("%d completion batches sent, want 2 (the lost answer, then the retry)", lossy.calls)
		}
		for _, p := range lossy.sent {
			if p.RequestID != "" {
				t.Errorf("completion sent with request_id %q, want none", p.RequestID)
			}
		}
	})
}

// lostAnswerAgain is answerLost whose first reads of the job after that lost
// answer fail too (getFails of them), and which runs onFirst once the first
// batch is applied.
type lostAnswerAgain struct {
	answerLost
	onFirst  func()
	armed    bool
	getFails int
}

func (a *lostAnswerAgain) JobCompleteManyErrs(ctx context.Context, params []driver.CompleteParams) []error {
	errs := a.answerLost.JobCompleteManyErrs(ctx, params)
	a.mu.Lock()
	first := !a.armed
	a.armed = true
	a.mu.Unlock()
	if first && a.onFirst != nil {
		a.onFirst()
	}
	return errs
}

func (a *lostAnswerAgain) JobGet(ctx context.Context, id int64) (*driver.Job, error) {
	a.mu.Lock()
	fail := a.armed && a.getFails > 0
	if fail {
		a.getFails--
	}
	a.mu.Unlock()
	if fail {
		return nil, errors.New("read tcp 127.0.0.1:5432: connection reset by peer")
	}
	return a.Driver.JobGet(ctx, id)
}

// The read that tells a retried completion whether its lost-answer try was
// applied must not turn a success into a lost lease: not when the read itself
// fails (the report retries), and not after a hard stop canceled the worker's
// jobs context (a result is kept past the hard stop). A job that another
// attempt completed stays a lost lease (TestWorkerCompletionRetryOfAnotherAttempt).
func TestWorkerCompletionAnswerLostCheckFails(t *testing.T) {
	for _, tc := range []struct {
		name     string
		getFails int
		hardStop bool
	}{{"read fails", 1, false}, {"hard stop", 0, true}} {
		t.Run(tc.name, func(t *testing.T) {
			forEachKind(t, func(t *testing.T, kind string) {
				base := newClient(t, kind, nil)
				lossy := &lostAnswerAgain{answerLost: answerLost{Driver: base.Driver()}, getFails: tc.getFails}
				c, err := drover.NewClient(lossy, nil)
				if err != nil {
					t.Fatal(err)
				}
				ws := drover.NewWorkers()
				handlerCtx := make(chan context.Context, 1)
				drover.Register(ws, "quick", func(ctx context.Context, _ *drover.Job, _ struct{}) (any, error) {
					handlerCtx <- ctx
					return "ok", nil
				})
				obs := &outcomes{finished: make(chan string, 4), lost: make(chan int64, 4)}
				cfg := fastWorkerConfig(ws)
				cfg.Observer = obs
				w, err := drover.NewWorker(c, cfg)
				if err != nil {
					t.Fatal(err)
				}
				stopped := make(chan struct{})
				if tc.hardStop {
					lossy.onFirst = func() {
						hctx := <-handlerCtx
						expired, cancel := context.WithCancel(context.Background())
						cancel()
						go func() { _ = w.Stop(expired); close(stopped) }() // Stop's deadline is already past: the hard stop
						<-hctx.Done()                                       // the jobs context is canceled
					}
				} else {
					close(stopped)
					t.Cleanup(func() {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						defer cancel()
						_ = w.Stop(ctx)
					})
				}
				if err := w.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { <-stopped })
				id := enqueue(t, c, "quick", nil, nil).ID
				if got := obs.reported(t); got != "succeeded" {
					t.Fatalf("outcome %q, want succeeded: the job succeeded at this worker's attempt", got)
				}
				if s, l := w.Stats().Succeeded.Load(), w.Stats().LeaseLost.Load(); s != 1 || l != 0 {
					t.Errorf("stats: succeeded %d, lease lost %d; want 1 and 0", s, l)
				}
				lossy.mu.Lock()
				lossy.getFails = 0
				lossy.mu.Unlock()
				if j := getJob(t, c, id); j.Status != drover.StatusSucceeded || j.Attempt != 1 {
					t.Errorf("job %+v, want succeeded at attempt 1", j)
				}
			})
		})
	}
}

// TestWorkerCompletionAnswerLostNeverChecked: when every read that would tell
// whether the lost-answer completion was applied fails until the report gives
// up, the worker says it could not tell, not that the job will run again: it was
// applied, and stays succeeded.
func TestWorkerCompletionAnswerLostNeverChecked(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		base := newClient(t, kind, nil)
		lossy := &lostAnswerAgain{answerLost: answerLost{Driver: base.Driver()}, getFails: 1 << 30}
		c, err := drover.NewClient(lossy, nil)
		if err != nil {
			t.Fatal(err)
		}
		ws := drover.NewWorkers()
		drover.Register(ws, "quick", func(context.Context, *drover.Job, struct{}) (any, error) { return "ok", nil })
		gaveUp := &logWatch{msg: "could not", seen: make(chan string, 1)}
		cfg := fastWorkerConfig(ws)
		cfg.Logger = slog.New(gaveUp)
		startWorker(t, c, cfg)
		id := enqueue(t, c, "quick", nil, nil).ID
		select {
		case msg := <-gaveUp.seen:
			if !strings.Contains(msg, "could not tell whether the result was recorded") {
				t.Errorf("gave up with %q, want it to say it could not tell", msg)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the report never gave up")
		}
		lossy.mu.Lock()
		lossy.getFails = 0
		lossy.mu.Unlock()
		if j := getJob(t, c, id); j.Status != drover.StatusSucceeded || j.Attempt != 1 {
			t.Errorf("job %+v, want succeeded at attempt 1", j)
		}
	})
}

// logWatch is a slog.Handler that sends the first message starting with msg.
type logWatch struct {
	msg  string
	seen chan string
}

func (h *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (h *logWatch) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logWatch) WithGroup(string) slog.Handler            { return h }
func (h *logWatch) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.msg) {
		select {
		case h.seen <- r.Message:
		default:
		}
	}
	return nil
}

// takenOver is a real driver whose first batch of completions is not applied:
// before it answers with a connection error, the job's lease expires, it is
// reaped, and another worker claims and completes it (attempt 2).
type takenOver struct {
	driver.Driver
	t    *testing.T
	once sync.Once
}

func (d *takenOver) JobCompleteManyErrs(ctx context.Context, params []driver.CompleteParams) []error {
	first := false
	d.once.Do(func() { first = true })
	if !first {
		return d.Driver.JobCompleteManyErrs(ctx, params)
	}
	later := time.Now().Add(time.Hour)
	if _, err := d.Driver.JobReapExpired(ctx, driver.ReapParams{Limit: 10, Now: &later}); err != nil {
		d.t.Error(err)
	}
	errs := make([]error, len(params))
	for i, p := range params {
		jobs, err := d.Driver.JobClaim(ctx, driver.ClaimParams{ID: p.ID, Limit: 1, Owner: "other", LeaseDuration: time.Minute, Start: true, Now: &later})
		if err != nil || len(jobs) != 1 || jobs[0].Attempt != p.Attempt+1 {
			d.t.Errorf("another worker's claim of job %d: %v, %v; want it at attempt %d", p.ID, jobs, err, p.Attempt+1)
		} else {
			fence := driver.FenceParams{ID: p.ID, Attempt: jobs[0].Attempt, LeaseToken: jobs[0].LeaseToken}
			if err := d.Driver.JobCompleteManyErrs(ctx, []driver.CompleteParams{{FenceParams: fence, Result: []byte(`"theirs"`)}})[0]; err != nil {
				d.t.Errorf("another worker's completion of job %d: %v", p.ID, err)
			}
		}
		errs[i] = errors.New("read tcp 127.0.0.1:5432: connection reset by peer")
	}
	return errs
}

// A retried completion whose first try was not applied, and whose job another
// attempt has since completed, ends as a lost lease: succeeded, but not at this
// worker's attempt.
func TestWorkerCompletionRetryOfAnotherAttempt(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c, w, obs := observedWorker(t, &takenOver{Driver: newClient(t, kind, nil).Driver(), t: t}, "mine")
		id := enqueue(t, c, "quick", nil, nil).ID
		if got := obs.reported(t); got != "lease lost" {
			t.Fatalf("outcome %q, want a lost lease: attempt 2 completed the job", got)
		}
		if s, l := w.Stats().Succeeded.Load(), w.Stats().LeaseLost.Load(); s != 0 || l != 1 {
			t.Errorf("stats: succeeded %d, lease lost %d; want 0 and 1", s, l)
		}
		if j := getJob(t, c, id); j.Status != drover.StatusSucceeded || j.Attempt != 2 || string(j.Result) != `"theirs"` {
			t.Errorf("job %+v, want succeeded by attempt 2 with its result", j)
		}
	})
}
