package drover_test

import (
	"context"
	"sync"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
)

// holdCompletions is a real driver whose batched completions wait until release
// is closed: a slow commit, as a loaded database gives.
type holdCompletions struct {
	driver.Driver
	entered, release chan struct{}
	once             sync.Once
}

func (h *holdCompletions) JobCompleteManyErrs(ctx context.Context, params []driver.CompleteParams) []error {
	h.once.Do(func() { close(h.entered) })
	<-h.release
	return h.Driver.JobCompleteManyErrs(ctx, params)
}

// A handler slot frees when the handler returns, not when its outcome is
// stored: with concurrency 1, a second job runs while the first one's completion
// is still being written, and both complete once it is.
func TestWorkerSlotFreesBeforeCompletionIsStored(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		base := newClient(t, kind, nil)
		held := &holdCompletions{Driver: base.Driver(), entered: make(chan struct{}), release: make(chan struct{})}
		c, err := drover.NewClient(held, nil)
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan int64, 4)
		ws := drover.NewWorkers()
		drover.Register(ws, "quick", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			started <- job.ID
			return nil, nil
		})
		cfg := fastWorkerConfig(ws)
		cfg.Queues = map[string]int{drover.DefaultQueue: 1}
		released := false
		defer func() {
			if !released {
				close(held.release) // let the worker stop if the test failed early
			}
		}()
		startWorker(t, c, cfg)

		first := enqueue(t, c, "quick", nil, nil).ID
		if got := waitChan(t, started, "the first job's handler"); got != first {
			t.Fatalf("started job %d, want %d", got, first)
		}
		waitChan(t, held.entered, "the first job's completion to be written")

		second := enqueue(t, c, "quick", nil, nil).ID
		if got := waitChan(t, started, "the second job's handler while the first one's completion is held"); got != second {
			t.Fatalf("started job %d, want %d", got, second)
		}
		if j := getJob(t, c, first); j.Status != drover.StatusRunning {
			t.Fatalf("first job while its completion is held: %s, want running", describe(j))
		}

		close(held.release)
		released = true
		for _, id := range []int64{first, second} {
			if j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed); j.Status != drover.StatusSucceeded || j.Executions != 1 {
				t.Errorf("job %d: %s, want succeeded after one execution", id, describe(j))
			}
		}
	})
}
