package drover_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover"
)

// A handler that ignores its context past its timeout and grace is abandoned:
// its attempt is reported and its job retried no sooner than a lease later,
// while the handler may still run. On a queue with a free slot, the same
// worker then claimed the retry and ran it beside the abandoned handler, two
// runs of one job at once in one process. The retry is given back instead,
// without using an execution, until the abandoned handler has returned.
func TestAbandonedHandlersRetryDoesNotRunBesideIt(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		unblock := make(chan struct{})
		var unblocked atomic.Bool
		t.Cleanup(func() {
			if !unblocked.Load() {
				close(unblock)
			}
		})
		var calls, now, most atomic.Int32
		drover.Register(ws, "stuck", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			calls.Add(1)
			n := now.Add(1)
			defer now.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if job.Executions == 1 {
				<-unblock // ignores ctx, as a blocking call without one would
			}
			return "done", nil
		}, noBackoff)
		cfg := fastWorkerConfig(ws)
		cfg.Queues = map[string]int{drover.DefaultQueue: 4}
		cfg.TimeoutGrace = 50 * time.Millisecond
		startWorker(t, c, cfg)

		id := enqueue(t, c, "stuck", nil, &drover.EnqueueOpts{MaxAttempts: 3, Timeout: 100 * time.Millisecond}).ID
		j := waitJob(t, c, id, "retried after its handler was abandoned", func(j *drover.Job) bool { return len(j.Errors) == 1 })
		if !strings.Contains(j.Errors[0].Error, "abandoned") {
			t.Fatalf("attempt 1 ended with %q, want the abandoned handler's error", j.Errors[0].Error)
		}
		// Claimed again a lease later: given back, or (the bug) run.
		j = waitJob(t, c, id, "claimed again", func(j *drover.Job) bool {
			return j.Attempt >= 2 && j.Status == drover.StatusQueued || calls.Load() > 1
		})
		if n := calls.Load(); n != 1 {
			t.Errorf("the handler ran %d times while its abandoned first run was still going, want 1 (%s)", n, describe(j))
		}
		if j.Executions != 1 {
			t.Errorf("after the retry was given back: %s, want 1 execution used", describe(j))
		}
		unblocked.Store(true)
		close(unblock)
		j = waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Executions != 2 {
			t.Errorf("after the abandoned handler returned: %s, want succeeded at its second execution", describe(j))
		}
		if m := most.Load(); m != 1 {
			t.Errorf("%d runs of one job at once in one worker", m)
		}
	})
}
