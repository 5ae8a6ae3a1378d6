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

// downHeartbeats is the real driver whose heartbeats fail with a transient
// error (the database unreachable for a while); every other call goes through.
type downHeartbeats struct{ driver.Driver }

func (downHeartbeats) JobHeartbeat(context.Context, driver.HeartbeatParams) (driver.HeartbeatResult, error) {
	return driver.HeartbeatResult{}, errors.New("read tcp 127.0.0.1:5432: connection reset by peer")
}

// A worker whose heartbeats keep failing stops its handler before the lease
// could expire, but the lease may still be its own: what the handler returns
// is reported, and the fence accepts it. It used to be dropped as if the
// lease were known lost, leaving a job whose handler had succeeded running
// under nobody until the reaper ran it again (helper-37).
func TestUncertainLeaseStillReportsTheOutcome(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		base := newClient(t, kind, nil)
		c, err := drover.NewClient(downHeartbeats{base.Driver()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ws := drover.NewWorkers()
		drover.Register(ws, "pay", func(ctx context.Context, _ *drover.Job, _ struct{}) (any, error) {
			<-ctx.Done() // the payment call returns just as the context ends
			return "paid", nil
		})
		startWorker(t, c, fastWorkerConfig(ws))
		id := enqueue(t, base, "pay", nil, nil).ID
		j := waitStatus(t, base, id, drover.StatusSucceeded)
		if j.Executions != 1 {
			t.Errorf("executions %d, want 1", j.Executions)
		}
	})
}

// A handler abandoned at a hard stop (it ignores its context) may still be
// running: its job is retried no sooner than one lease later, as a crashed
// worker's would be. With the shutdown's zero delay another worker claimed it
// at once and ran it beside the abandoned handler (helper-37).
func TestAbandonedHandlersJobWaitsALease(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		started, release := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(release) })
		ws := drover.NewWorkers()
		drover.Register(ws, "pay", func(context.Context, *drover.Job, struct{}) (any, error) {
			close(started)
			<-release // a blocking call without a context
			return "paid", nil
		})
		cfg := fastWorkerConfig(ws)
		w, err := drover.NewWorker(c, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		id := enqueue(t, c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 3}).ID
		waitChan(t, started, "the handler to start")
		stopped := time.Now()
		ctx, cancel := context.WithDeadline(context.Background(), stopped)
		defer cancel()
		_ = w.Stop(ctx) // past its deadline at once: the hard stop, then the grace
		j := getJob(t, c, id)
		if j.Status != drover.StatusQueued || j.RunAt.Before(stopped.Add(cfg.LeaseDuration)) {
			t.Errorf("after the hard stop abandoned the handler: %s, run_at %s after Stop; want queued, no sooner than the lease (%s)",
				describe(j), j.RunAt.Sub(stopped), cfg.LeaseDuration)
		}
	})
}

// answerAfterHardStop commits a claim, then holds its answer until the
// claim's context ends: the worker's hard stop.
type answerAfterHardStop struct {
	driver.Driver
	committed chan struct{}
}

func (a *answerAfterHardStop) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	jobs, err := a.Driver.JobClaim(context.WithoutCancel(ctx), p)
	if err == nil && len(jobs) > 0 {
		close(a.committed)
		<-ctx.Done()
	}
	return jobs, err
}

// stopAtClaim runs a worker over drv whose "pay" handler counts its runs,
// enqueues one job of max_attempts 1, and stops the worker with a deadline
// already past once the claim has committed (committed), while its answer is
// held: the hard stop. It returns the job's id and the handler's runs.
func stopAtClaim(t *testing.T, base *drover.Client, drv driver.Driver, committed <-chan struct{}) (int64, *atomic.Int32) {
	t.Helper()
	c, err := drover.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	ws := drover.NewWorkers()
	drover.Register(ws, "pay", func(context.Context, *drover.Job, struct{}) (any, error) {
		runs.Add(1)
		return "paid", nil
	})
	w, err := drover.NewWorker(c, fastWorkerConfig(ws))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := enqueue(t, base, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
	waitChan(t, committed, "the claim to commit")
	ctx, cancel := context.WithDeadline(context.Background(), time.Now())
	defer cancel()
	_ = w.Stop(ctx)
	return id, &runs
}

// A claim whose answer arrives when the worker is stopping is not run: Stop
// gives claimed jobs that have not started back to their queue, without using
// an execution. Started after the hard stop with its context already
// canceled, a job on its last attempt went to the DLQ without a run
// (helper-37).
func TestClaimAnsweredAfterTheHardStopIsGivenBack(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		base := newClient(t, kind, nil)
		drv := &answerAfterHardStop{Driver: base.Driver(), committed: make(chan struct{})}
		id, runs := stopAtClaim(t, base, drv, drv.committed)
		if n := runs.Load(); n != 0 {
			t.Errorf("the handler ran %d times after the hard stop", n)
		}
		if j := getJob(t, base, id); j.Status != drover.StatusQueued || j.Executions != 0 {
			t.Errorf("claimed by a worker at its hard stop: %s; want given back: queued, no execution used", describe(j))
		}
	})
}

// snoozeFailsOnce is answerAfterHardStop whose first JobSnooze fails with a
// transient error.
type snoozeFailsOnce struct {
	*answerAfterHardStop
	failed atomic.Bool
}

func (s *snoozeFailsOnce) JobSnooze(ctx context.Context, p driver.SnoozeParams) (*driver.Job, error) {
	if s.failed.CompareAndSwap(false, true) {
		return nil, errors.New("read tcp 127.0.0.1:5432: connection reset by peer")
	}
	return s.Driver.JobSnooze(ctx, p)
}

// A give-back whose snooze fails for a transient reason is tried again: left
// running, the job waited for its lease to expire and the reaper counted the
// execution its claim took, failing a job on its last attempt without a run.
func TestGiveBackIsRetried(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		base := newClient(t, kind, nil)
		drv := &snoozeFailsOnce{answerAfterHardStop: &answerAfterHardStop{Driver: base.Driver(), committed: make(chan struct{})}}
		id, _ := stopAtClaim(t, base, drv, drv.committed)
		if !drv.failed.Load() {
			t.Fatal("no give-back was tried")
		}
		if j := getJob(t, base, id); j.Status != drover.StatusQueued || j.Executions != 0 {
			t.Errorf("after a give-back whose first try failed: %s; want queued, no execution used", describe(j))
		}
	})
}
