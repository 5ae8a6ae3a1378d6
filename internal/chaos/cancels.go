package chaos

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/lifecycle"
)

// cancelSet records the cancels the harness sent: job id → whether the call
// answered that the job is canceled (then it must end canceled, no attempt may
// start after it, and a handler it caught running must return soon after).
type cancelSet struct {
	mu   sync.Mutex
	sent map[int64]bool
}

func (c *cancelSet) record(id int64, acked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sent == nil {
		c.sent = map[int64]bool{}
	}
	c.sent[id] = c.sent[id] || acked
}

// cancelJobs enqueues a long KindWork job (10 s) every interval until the
// enqueuer is told to hurry, and cancels each: every other one at once (queued,
// or just claimed), the rest once a worker runs it. Faults go on meanwhile.
func (h *harness) cancelJobs(ctx context.Context, e *enqueuer, interval time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			t := time.NewTimer(interval)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-e.hurry:
				t.Stop()
				return
			case <-t.C:
			}
			seq := h.led.take()
			var id int64
			if !e.retry(ctx, "cancel target", func() error {
				res, err := h.client.Enqueue(ctx, KindWork, workArgs{Seq: seq, MS: 10000},
					&drover.EnqueueOpts{IdempotencyKey: idemKey(seq)})
				if err == nil {
					id = res.Job.ID
				}
				return err
			}) {
				return
			}
			h.led.ack(seq, id)
			if i%2 == 1 && !h.awaitRunning(ctx, id, 3*h.prof.lease) {
				continue // no worker took it in time: it runs its 10 s
			}
			h.cancel(ctx, id)
		}
	}()
	return done
}

// awaitRunning polls until job id is running, for at most max.
func (h *harness) awaitRunning(ctx context.Context, id int64, max time.Duration) bool {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		if j, err := h.client.Get(ctx, id); err == nil && j.Status == lifecycle.StatusRunning {
			return true
		}
		if pace(ctx, 50*time.Millisecond) != nil {
			return false
		}
	}
	return false
}

// cancel cancels job id, retrying while the database is unreachable. A retry
// whose first call committed unanswered finds the job terminal: that cancel
// counts as sent, not acknowledged.
func (h *harness) cancel(ctx context.Context, id int64) {
	h.cancels.record(id, false)
	wait := 20 * time.Millisecond
	for try := 0; try < 30 && ctx.Err() == nil; try++ {
		j, err := h.client.Cancel(ctx, id)
		switch {
		case err == nil:
			h.cancels.record(id, j.Status == lifecycle.StatusCanceled)
			if j.Status != lifecycle.StatusCanceled {
				h.problem("cancel of job %d answered status %s", id, j.Status)
			}
			return
		case errors.Is(err, drover.ErrInvalidTransition), errors.Is(err, drover.ErrInvalidArgument):
			return // terminal already: by an unanswered try of ours, or it finished
		}
		if pace(ctx, wait) != nil {
			return
		}
		wait = min(2*wait, time.Second)
	}
}

func (c *cancelSet) acked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ok := range c.sent {
		if ok {
			n++
		}
	}
	return n
}
