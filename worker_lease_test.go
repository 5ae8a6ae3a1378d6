package drover_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
)

// failingHeartbeats lets the first heartbeat through, answering it late (the
// reply takes 300ms to come back, as on a congested link), and then fails every
// heartbeat: at once, or by hanging until the call's deadline.
type failingHeartbeats struct {
	driver.Driver
	hang    bool
	calls   atomic.Int64
	firstOK chan struct{}
}

func (f *failingHeartbeats) JobHeartbeat(ctx context.Context, p driver.HeartbeatParams) (driver.HeartbeatResult, error) {
	if f.calls.Add(1) == 1 {
		r, err := f.Driver.JobHeartbeat(ctx, p)
		time.Sleep(300 * time.Millisecond)
		close(f.firstOK)
		return r, err
	}
	if f.hang {
		<-ctx.Done()
		return driver.HeartbeatResult{}, ctx.Err()
	}
	return driver.HeartbeatResult{}, errors.New("connection refused")
}

// When heartbeats keep failing, the handler's context ends before the lease its
// last successful heartbeat set expires, however late that heartbeat's answer
// came and however the later ones fail: past the expiry the reaper may requeue
// the job and another worker start it, and a handler that honours its context
// must have been told to stop by then.
func TestWorkerCancelsHandlerBeforeAnUnrenewedLeaseExpires(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		for _, hang := range []bool{false, true} {
			base := newClient(t, kind, nil)
			hb := &failingHeartbeats{Driver: base.Driver(), hang: hang, firstOK: make(chan struct{})}
			c, err := drover.NewClient(hb, nil)
			if err != nil {
				t.Fatal(err)
			}
			ws := drover.NewWorkers()
			started := make(chan struct{}, 1)
			type stopped struct {
				at    time.Time
				cause error
			}
			ended := make(chan stopped, 1)
			drover.Register(ws, "job", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
				started <- struct{}{}
				<-ctx.Done()
				ended <- stopped{time.Now(), context.Cause(ctx)}
				return nil, ctx.Err()
			})
			cfg := fastWorkerConfig(ws)
			cfg.LeaseDuration, cfg.HeartbeatInterval = 3*time.Second, time.Second // margin: half an interval
			cfg.DefaultTimeout = time.Minute
			startWorker(t, c, cfg)
			id := enqueue(t, base, "job", nil, nil).ID
			waitChan(t, started, "the handler to start")
			waitChan(t, hb.firstOK, "the first heartbeat's answer")
			j := getJob(t, base, id)
			if j.LeaseExpiresAt == nil {
				t.Fatalf("job %d has no lease after its heartbeat: %s", id, describe(j))
			}
			expires := *j.LeaseExpiresAt
			got := waitChan(t, ended, "the handler's context to end")
			if !got.at.Before(expires) {
				t.Errorf("hang=%v: the handler's context ended %s after its lease expired, want before", hang, got.at.Sub(expires))
			}
			if !strings.Contains(got.cause.Error(), "lease may have expired") {
				t.Errorf("hang=%v: the context's cause = %v, want the lease that may have expired", hang, got.cause)
			}
			t.Logf("hang=%v: canceled %s before the lease expired: %v", hang, expires.Sub(got.at).Round(time.Millisecond), got.cause)
		}
	})
}

// A handler that answers a hard stop with Snooze is snoozed (no execution used),
// and one that answers with Permanent fails: the stop's own error wraps theirs
// without hiding it.
func TestWorkerHardStopKeepsTheHandlersSnoozeOrPermanent(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		for _, answer := range []string{"snooze", "permanent"} {
			c := newClient(t, kind, nil)
			ws := drover.NewWorkers()
			started := make(chan struct{})
			drover.Register(ws, "job", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
				close(started)
				<-ctx.Done()
				if answer == "snooze" {
					return nil, drover.Snooze(time.Minute)
				}
				return nil, drover.Permanent(errors.New("cannot go on"))
			})
			w, err := drover.NewWorker(c, fastWorkerConfig(ws))
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			id := enqueue(t, c, "job", nil, &drover.EnqueueOpts{MaxAttempts: 3}).ID
			waitChan(t, started, "the handler to start")
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // no grace: the handlers are canceled at once
			_ = w.Stop(ctx)
			j := getJob(t, c, id)
			switch answer {
			case "snooze":
				if j.Status != drover.StatusQueued || j.Executions != 0 || !j.RunAt.After(time.Now().Add(30*time.Second)) {
					t.Errorf("Snooze(1m) answered to a hard stop: %s (run_at %s), want queued a minute ahead with no execution used", describe(j), j.RunAt)
				}
			case "permanent":
				if j.Status != drover.StatusFailed || !strings.Contains(j.Error, "cannot go on") {
					t.Errorf("Permanent answered to a hard stop: %s, want failed with the handler's error", describe(j))
				}
			}
		}
	})
}

// claimThenStop claims for real, then, on the first claim that got jobs, waits
// for the claim's context to end (at most half a second, within the test's lease
// of two) and, if it does, answers as a driver whose commit went through just
// before its context ended: with the context's error.
type claimThenStop struct {
	driver.Driver
	once    sync.Once
	inClaim chan struct{}
}

func (c *claimThenStop) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	jobs, err := c.Driver.JobClaim(context.WithoutCancel(ctx), p)
	if err != nil || len(jobs) == 0 {
		return jobs, err
	}
	first := false
	c.once.Do(func() { first = true; close(c.inClaim) })
	if first {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond): // not canceled: go on
		}
	}
	return jobs, nil
}

// Stop lets a claim under way finish and gives its jobs back (they were
// claimed but not started): canceled between its commit and its answer, the
// claim's jobs sat running, never run, until their lease expired and the
// reaper counted an execution (on a last attempt: failed without a run).
func TestWorkerStopDoesNotDropAClaimUnderWay(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		base := newClient(t, kind, nil)
		drv := &claimThenStop{Driver: base.Driver(), inClaim: make(chan struct{})}
		c, err := drover.NewClient(drv, nil)
		if err != nil {
			t.Fatal(err)
		}
		ws := drover.NewWorkers()
		drover.Register(ws, "job", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) { return "ran", nil })
		w, err := drover.NewWorker(c, fastWorkerConfig(ws))
		if err != nil {
			t.Fatal(err)
		}
		id := enqueue(t, base, "job", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitChan(t, drv.inClaim, "the claim")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if j := getJob(t, base, id); j.Status != drover.StatusQueued || j.Executions != 0 {
			t.Errorf("the job of a claim under way at Stop: %s, want it given back: queued, no execution used", describe(j))
		}
	})
}

// A handler that ends its goroutine with runtime.Goexit (t.FailNow in a
// handler, say) ends its job like an error: it used to hold its slot and lease
// until its timeout, or for ever without one.
func TestWorkerHandlerCallingGoexitFailsItsJob(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "job", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			runtime.Goexit()
			return nil, nil
		})
		cfg := fastWorkerConfig(ws)
		cfg.DefaultTimeout = -1 // none
		startWorker(t, c, cfg)
		id := enqueue(t, c, "job", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		j := waitStatus(t, c, id, drover.StatusFailed)
		if !strings.Contains(j.Error, "Goexit") {
			t.Errorf("job of a handler that called Goexit: %s, want failed saying so", describe(j))
		}
	})
}

// A handler that ends its goroutine and then panics in a deferred function of
// its own (a cleanup that panics while t.FailNow unwinds, say) ends its job as
// a panic, and frees its slot: the worker recovered the panic, but the
// goroutine went on ending, past the point where the outcome was answered, so
// the job stayed running, its lease renewed, and its queue's one slot stayed
// taken (helper-12).
func TestWorkerHandlerCallingGoexitThenPanickingFailsItsJob(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "job", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			defer func() { panic("cleanup panicked while the goroutine was ending") }()
			runtime.Goexit()
			return nil, nil
		})
		drover.Register(ws, "next", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			return "ok", nil
		})
		cfg := fastWorkerConfig(ws)
		cfg.DefaultTimeout = -1 // none
		cfg.Queues = map[string]int{drover.DefaultQueue: 1}
		startWorker(t, c, cfg)
		id := enqueue(t, c, "job", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		next := enqueue(t, c, "next", nil, nil).ID
		j := waitStatus(t, c, id, drover.StatusFailed)
		if !strings.Contains(j.Error, "cleanup panicked while the goroutine was ending") {
			t.Errorf("job of a handler that called Goexit, then panicked: %s, want failed with the panic", describe(j))
		}
		waitStatus(t, c, next, drover.StatusSucceeded) // the queue's one slot was freed
	})
}

// With a heartbeat interval close to the lease, heartbeats that succeed keep a
// long job: the worker gives up on an unrenewed lease only after the next
// heartbeat was due.
func TestWorkerKeepsALongJobWithAnIntervalCloseToTheLease(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "job", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			work := time.NewTimer(5 * time.Second) // the job's work: two and a half leases long
			defer work.Stop()
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-work.C:
				return "done", nil
			}
		})
		cfg := fastWorkerConfig(ws)
		cfg.LeaseDuration, cfg.HeartbeatInterval = 2*time.Second, 1300*time.Millisecond
		startWorker(t, c, cfg)
		id := enqueue(t, c, "job", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		if j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed); j.Status != drover.StatusSucceeded {
			t.Errorf("a job 2.5 leases long, heartbeats every 0.65 of the lease: %s, want succeeded", describe(j))
		}
	})
}

// hangingClaims hangs every claim until its context ends (a database that stopped
// answering).
type hangingClaims struct {
	driver.Driver
	once    sync.Once
	inClaim chan struct{}
}

func (h *hangingClaims) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	h.once.Do(func() { close(h.inClaim) })
	<-ctx.Done()
	return nil, ctx.Err()
}

// Stop lets a claim under way finish, but not past its own deadline: then it
// cancels the claim with the running jobs, instead of waiting up to a lease for a
// claim that does not come back.
func TestWorkerStopCancelsAHungClaimAtItsDeadline(t *testing.T) {
	c := newClient(t, "sqlite", nil)
	drv := &hangingClaims{Driver: c.Driver(), inClaim: make(chan struct{})}
	hc, err := drover.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := drover.NewWorkers()
	drover.Register(ws, "job", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) { return nil, nil })
	cfg := fastWorkerConfig(ws)
	cfg.LeaseDuration, cfg.HeartbeatInterval = time.Minute, 0
	w, err := drover.NewWorker(hc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitChan(t, drv.inClaim, "a claim")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(ctx) }()
	if err := waitChan(t, stopped, "Stop to return"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop with a hung claim = %v, want its deadline's error", err)
	}
}

// A handler that ignores its context past TimeoutGrace is abandoned: its job is
// reported (retried here) while the handler still runs. Its slot stays taken
// until it returns, so a queue of concurrency 1 never runs two handlers at once,
// and this worker cannot run the job's retry beside it. Before, the slot was
// freed on abandoning, and the retry ran at once beside the first run.
func TestAbandonedHandlerKeepsItsSlot(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		unblock := make(chan struct{})
		var calls, now, most atomic.Int32
		drover.Register(ws, "stuck", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			calls.Add(1)
			n := now.Add(1)
			defer now.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-unblock // ignores ctx, as a blocking call without one would
			return "done", nil
		}, noBackoff)
		cfg := fastWorkerConfig(ws)
		cfg.Queues = map[string]int{drover.DefaultQueue: 1}
		cfg.TimeoutGrace = 50 * time.Millisecond
		w := startWorker(t, c, cfg)

		id := enqueue(t, c, "stuck", nil, &drover.EnqueueOpts{MaxAttempts: 3, Timeout: 100 * time.Millisecond}).ID
		j := waitJob(t, c, id, "retried after its handler was abandoned", func(j *drover.Job) bool { return len(j.Errors) == 1 })
		if !strings.Contains(j.Errors[0].Error, "abandoned") {
			t.Fatalf("attempt 1 ended with %q, want the abandoned handler's error", j.Errors[0].Error)
		}
		// The retry is due at once (no backoff) and the worker polls every 50ms:
		// without its slot held, it ran within a poll or two.
		time.Sleep(10 * cfg.PollInterval)
		if n := calls.Load(); n != 1 {
			t.Errorf("the handler ran %d times while the first run was still going, want 1", n)
		}
		close(unblock)
		j = waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Attempt != 2 {
			t.Errorf("after the abandoned handler returned: %s, want succeeded at attempt 2", describe(j))
		}
		if m := most.Load(); m != 1 {
			t.Errorf("%d handlers ran at once on a queue of concurrency 1", m)
		}
		if n := w.Stats().Abandoned.Load(); n != 1 {
			t.Errorf("Stats().Abandoned = %d, want 1", n)
		}
	})
}

// A timed-out job's lease is renewed no further than its timeout plus one
// lease, so the worker gives up on a handler that has not returned within
// half a lease of its timeout (the default TimeoutGrace is at most that) and
// reports, before the reaper can take the job back. With a 2s lease and the
// grace at its old default of 10s, a handler that took 2.5s to wind down was
// still this worker's running job when the reaper handed its job to the next
// attempt (helper-35's F4).
func TestTimedOutHandlerIsGivenUpBeforeItsLeaseEnds(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		runEngine(t, c)
		ws := drover.NewWorkers()
		var w *drover.Worker
		type start struct {
			attempt   int
			abandoned int64 // handlers this worker had given up on then
		}
		starts := make(chan start, 8)
		var first atomic.Bool
		drover.Register(ws, "slow-stop", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			starts <- start{job.Attempt, w.Stats().Abandoned.Load()}
			if first.CompareAndSwap(false, true) {
				<-ctx.Done()
				time.Sleep(2500 * time.Millisecond) // honours its context, but winds down slowly
				return nil, ctx.Err()
			}
			return "done", nil
		}, noBackoff)
		cfg := fastWorkerConfig(ws)
		cfg.TimeoutGrace = 10 * time.Second // the default; the 2s lease cuts it to 1s
		w = startWorker(t, c, cfg)
		id := enqueue(t, c, "slow-stop", nil, &drover.EnqueueOpts{MaxAttempts: 3, Timeout: 300 * time.Millisecond}).ID
		if s := waitChan(t, starts, "attempt 1 to start"); s.attempt != 1 {
			t.Fatalf("first start at attempt %d", s.attempt)
		}
		if s := waitChan(t, starts, "attempt 2 to start"); s.abandoned != 1 {
			t.Errorf("attempt %d started while attempt 1's handler was still this worker's running job (%d abandoned)", s.attempt, s.abandoned)
		}
		j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "abandoned") {
			t.Errorf("%s, want succeeded after attempt 1 was abandoned", describe(j))
		}
	})
}
