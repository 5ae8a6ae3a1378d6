package drover_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/server"
)

// attemptOutcomes records what a worker's observer is told, by attempt.
type attemptOutcomes struct {
	mu  sync.Mutex
	got map[int]string
	n   chan struct{}
}

func (o *attemptOutcomes) Claimed(string, int)   {}
func (o *attemptOutcomes) LeaseLost(*drover.Job) {}
func (o *attemptOutcomes) Finished(j *drover.Job, outcome string, _ time.Duration) {
	o.mu.Lock()
	o.got[j.Attempt] = outcome
	o.mu.Unlock()
	o.n <- struct{}{}
}

// failsThenGivesUp registers "flaky", which fails with a retryable error at
// attempt 1 and for good at attempt 2, and returns a worker config whose
// observer records the outcomes.
func failsThenGivesUp() (*drover.WorkerConfig, *attemptOutcomes, *logBuffer) {
	ws := drover.NewWorkers()
	drover.Register(ws, "flaky", func(_ context.Context, j *drover.Job, _ struct{}) (any, error) {
		if j.Attempt == 1 {
			return nil, errors.New("try again")
		}
		return nil, drover.Permanent(errors.New("give up"))
	}, drover.WithBackoff(func(int) time.Duration { return 0 }))
	cfg := fastWorkerConfig(ws)
	obs := &attemptOutcomes{got: map[int]string{}, n: make(chan struct{}, 4)}
	cfg.Observer = obs
	logs := &logBuffer{}
	cfg.Logger = logs.logger()
	return cfg, obs, logs
}

// wantRetriedThenFailed waits for both attempts' outcomes: attempt 1's
// report retried the job, attempt 2's failed it.
func (o *attemptOutcomes) wantRetriedThenFailed(t *testing.T, w *drover.Worker, logs *logBuffer) {
	t.Helper()
	waitChan(t, o.n, "an outcome")
	waitChan(t, o.n, "a second outcome")
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.got[1] != "retried" || o.got[2] != "failed" {
		t.Errorf("outcomes by attempt %v; want attempt 1 retried and attempt 2 failed\n%s", o.got, logs.String())
	}
	if r, f := w.Stats().Retried.Load(), w.Stats().Failed.Load(); r != 1 || f != 1 {
		t.Errorf("stats: retried %d, failed %d; want 1 and 1 (one job in the DLQ)", r, f)
	}
}

// failAnswerLost is a real driver whose first failure report of attempt 1
// is applied and answered with a connection error; its resend waits until
// attempt 2's failure report has been applied.
type failAnswerLost struct {
	driver.Driver
	mu       sync.Mutex
	first    int // attempt 1's reports sent
	second   chan struct{}
	released bool
}

func (a *failAnswerLost) JobFail(ctx context.Context, p driver.FailParams) (*driver.Job, error) {
	if p.Attempt != 1 {
		j, err := a.Driver.JobFail(ctx, p)
		a.mu.Lock()
		if !a.released {
			a.released = true
			close(a.second)
		}
		a.mu.Unlock()
		return j, err
	}
	a.mu.Lock()
	a.first++
	n := a.first
	a.mu.Unlock()
	if n > 1 {
		select {
		case <-a.second:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return a.Driver.JobFail(ctx, p)
	}
	if _, err := a.Driver.JobFail(ctx, p); err != nil {
		return nil, err
	}
	return nil, errors.New("read tcp 127.0.0.1:5432: connection reset by peer")
}

// A failure report whose answer was lost is sent again with its request_id,
// and answered as a replay with the job as it is now. When the job has moved
// on meanwhile (its retry was claimed again and failed for good), the worker
// counts its own report as the retry it was, not as the later attempt's
// failure: it read "failed" in the replay's answer and told its observer
// (drover_completions_total) and Stats that its attempt sent the job to the
// DLQ, which then counted one failed job twice and its retry not at all.
func TestWorkerRetryReplayAfterTheJobMovedOnCountsARetry(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		forEachKind(t, func(t *testing.T, kind string) {
			lossy := &failAnswerLost{Driver: newClient(t, kind, nil).Driver(), second: make(chan struct{})}
			c, err := drover.NewClient(lossy, nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg, obs, logs := failsThenGivesUp()
			w := startWorker(t, c, cfg)
			id := enqueue(t, c, "flaky", nil, &drover.EnqueueOpts{MaxAttempts: 3}).ID
			obs.wantRetriedThenFailed(t, w, logs)
			lossy.mu.Lock()
			sent := lossy.first
			lossy.mu.Unlock()
			if j := getJob(t, c, id); j.Status != drover.StatusFailed || j.Attempt != 2 || sent != 2 {
				t.Errorf("%s after %d sendings of attempt 1's report; want failed at attempt 2 after 2", describe(j), sent)
			}
		})
	})
	t.Run("remote", func(t *testing.T) {
		forEachKind(t, func(t *testing.T, kind string) {
			e := newFaultEnv(t, kind, server.Config{})
			second := make(chan struct{})
			e.proxy.setRule(func(r proxyReq) fault {
				if r.path != "/internal/task-complete" {
					return fault{}
				}
				switch {
				case bytes.Contains(r.body, []byte(`"attempt":2`)):
					return fault{answered: second}
				case r.n == 1:
					return fault{kind: dropAnswer} // applied; its answer lost
				}
				// Its resends, until attempt 2 failed the job.
				return fault{kind: holdRequest, hold: second}
			})
			cfg, obs, logs := failsThenGivesUp()
			id := enqueue(t, e.c, "flaky", nil, &drover.EnqueueOpts{MaxAttempts: 3}).ID
			w := startRemoteWorker(t, drover.RemoteConfig{URL: e.url(), WaitSeconds: 1}, cfg)
			obs.wantRetriedThenFailed(t, w, logs)
			if j := getJob(t, e.c, id); j.Status != drover.StatusFailed || j.Attempt != 2 {
				t.Errorf("%s; want failed at attempt 2", describe(j))
			}
		})
	})
}
