package drover_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
)

// heldCompletions is a real driver whose completion batches wait, once they
// reached it, until open is closed: a slow completion write, as under load.
type heldCompletions struct {
	driver.Driver
	reached chan struct{} // one send a batch that reached the driver
	open    chan struct{}
}

func (h *heldCompletions) JobCompleteManyErrs(ctx context.Context, params []driver.CompleteParams) []error {
	select {
	case h.reached <- struct{}{}:
	default:
	}
	<-h.open
	return h.Driver.JobCompleteManyErrs(ctx, params)
}

// TestHandlerContextEndsWhenItReturns: a handler's context ends when the
// handler returns, as an HTTP request's does, not once its outcome is written:
// a success waiting for its completion batch holds no context (nor a timer).
// A hard stop that comes while the batch waits has nothing to cancel, and the
// success is still written.
func TestHandlerContextEndsWhenItReturns(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		base := newClient(t, kind, nil)
		held := &heldCompletions{Driver: base.Driver(), reached: make(chan struct{}, 1), open: make(chan struct{})}
		c, err := drover.NewClient(held, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctxs := make(chan context.Context, 1)
		ws := drover.NewWorkers()
		drover.Register(ws, "quick", func(ctx context.Context, _ *drover.Job, _ struct{}) (any, error) {
			ctxs <- ctx
			return "ok", nil
		})
		hardStop := &logWatch{msg: "shutdown canceled", seen: make(chan string, 1)}
		cfg := fastWorkerConfig(ws)
		cfg.Logger = slog.New(hardStop)
		w, err := drover.NewWorker(c, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		id := enqueue(t, c, "quick", nil, nil).ID
		ctx := waitChan(t, ctxs, "the handler to run")
		waitChan(t, held.reached, "the completion batch to reach the driver")
		select {
		case <-ctx.Done():
		case <-time.After(waitTimeout):
			t.Fatalf("the handler's context was not done %s after it returned, while its completion waited", waitTimeout)
		}
		if err := context.Cause(ctx); err != context.Canceled {
			t.Errorf("the returned handler's context ended with %v, want context.Canceled", err)
		}
		if j := getJob(t, c, id); j.Status != drover.StatusRunning {
			t.Fatalf("job is %s while its completion waits, want running", j.Status)
		}

		// A stop whose deadline has passed cancels every running job's
		// context at once; this job's handler returned, and its success is
		// written all the same once the batch goes on.
		stopCtx, cancel := context.WithCancel(context.Background())
		cancel()
		stopped := make(chan error, 1)
		go func() { stopped <- w.Stop(stopCtx) }()
		waitChan(t, hardStop.seen, "the hard stop")
		close(held.open)
		if err := waitChan(t, stopped, "Stop to return"); err != context.Canceled {
			t.Errorf("Stop: %v, want context.Canceled (its deadline had passed)", err)
		}
		if j := getJob(t, c, id); j.Status != drover.StatusSucceeded || j.Attempt != 1 {
			t.Errorf("job %s, want succeeded at attempt 1", describe(j))
		}
	})
}
