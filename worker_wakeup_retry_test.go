package drover_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
)

// lateWakeups is a real driver whose first wake-up subscriptions fail, as
// LISTEN does while PostgreSQL restarts, and which tells each claim's end.
type lateWakeups struct {
	driver.Driver
	failures atomic.Int64 // subscriptions still to fail
	claimed  chan struct{}
}

func (d *lateWakeups) WakeupSubscribe(ctx context.Context) (<-chan string, error) {
	if d.failures.Add(-1) >= 0 {
		return nil, errors.New("wake-up listener: connection refused")
	}
	return d.Driver.WakeupSubscribe(ctx)
}

func (d *lateWakeups) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	jobs, err := d.Driver.JobClaim(ctx, p)
	select {
	case d.claimed <- struct{}{}:
	default:
	}
	return jobs, err
}

// A worker whose wake-up subscription could not be made when it started (the
// database restarting as the worker did) subscribes again until it can. It
// logged "wake-ups unavailable; polling only" and never tried again: for
// the rest of its life, however long, every job waited for the next poll
// (PollInterval) before it was claimed.
func TestWorkerSubscribesAgainAfterAFailedStart(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		base := newClient(t, kind, nil)
		drv := &lateWakeups{Driver: base.Driver(), claimed: make(chan struct{}, 1)}
		drv.failures.Store(2)
		c, err := drover.NewClient(drv, nil)
		if err != nil {
			t.Fatal(err)
		}
		ran := make(chan int64, 1)
		ws := drover.NewWorkers()
		drover.Register(ws, "k", func(_ context.Context, j *drover.Job, _ struct{}) (any, error) {
			ran <- j.ID
			return nil, nil
		})
		cfg := fastWorkerConfig(ws)
		cfg.PollInterval = time.Hour // wake-ups only
		startWorker(t, c, cfg)
		waitChan(t, drv.claimed, "the worker's first claim")
		id := enqueue(t, c, "k", nil, nil).ID
		select {
		case got := <-ran:
			if got != id {
				t.Fatalf("ran job %d, want %d", got, id)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("job %d enqueued after the worker's first claim did not run within %s: no wake-up reached the worker", id, waitTimeout)
		}
	})
}
