package drover_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/server"
)

// overlapCounter counts the handlers of one kind running at once, over every
// worker that runs them.
type overlapCounter struct {
	mu            sync.Mutex
	running, most int
}

func (o *overlapCounter) enter() {
	o.mu.Lock()
	o.running++
	o.most = max(o.most, o.running)
	o.mu.Unlock()
}

func (o *overlapCounter) leave() {
	o.mu.Lock()
	o.running--
	o.mu.Unlock()
}

func (o *overlapCounter) max() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.most
}

// heartbeatsDown fails every heartbeat while down is set, as a worker cut off
// from the database would see them, while its other calls, the engine's and
// other workers' go through.
type heartbeatsDown struct {
	driver.Driver
	down atomic.Bool
}

func (p *heartbeatsDown) JobHeartbeat(ctx context.Context, h driver.HeartbeatParams) (driver.HeartbeatResult, error) {
	if p.down.Load() {
		return driver.HeartbeatResult{}, errors.New("read tcp 127.0.0.1:5432: connection reset by peer")
	}
	return p.Driver.JobHeartbeat(ctx, h)
}

// TestUncertainLeaseHandlerEndsBeforeTheLease: when heartbeats keep failing,
// the worker ends the handler's context early enough that a handler that
// returns within its grace has returned before the lease may expire. It
// ended the context a margin (here 100ms) before the lease's end and then
// gave the handler its whole grace (1s): a handler that took 600ms to stop
// still ran when the reaper requeued the job and another worker started it.
func TestUncertainLeaseHandlerEndsBeforeTheLease(t *testing.T) {
	ctx := context.Background()
	base := newClient(t, "sqlite", nil)
	cut := &heartbeatsDown{Driver: base.Driver()}
	cut.down.Store(true)
	cutClient, err := drover.NewClient(cut, nil)
	if err != nil {
		t.Fatal(err)
	}
	var overlap overlapCounter
	var cutOffRuns atomic.Int32
	workers := func(name string) *drover.Workers {
		ws := drover.NewWorkers()
		drover.Register(ws, "pay", func(ctx context.Context, j *drover.Job, _ struct{}) (any, error) {
			overlap.enter()
			defer overlap.leave()
			if name == "cut-off" && cutOffRuns.Add(1) == 1 { // it may claim the retry too: done at once then
				<-ctx.Done()
				time.Sleep(600 * time.Millisecond) // winding down, well within its grace
				return nil, ctx.Err()
			}
			return "paid", nil
		})
		return ws
	}
	cfg := func(name string) *drover.WorkerConfig {
		return &drover.WorkerConfig{ID: name, Workers: workers(name), LeaseDuration: 2 * time.Second,
			HeartbeatInterval: 200 * time.Millisecond, PollInterval: 20 * time.Millisecond, TimeoutGrace: time.Second}
	}
	startWorker(t, cutClient, cfg("cut-off"))
	id := enqueue(t, base, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 5}).ID
	waitStatus(t, base, id, drover.StatusRunning)

	// The reaper and another worker, both reaching the database.
	eng := drover.NewEngine(base, &drover.EngineConfig{LeaderTTL: time.Second, ReapInterval: 20 * time.Millisecond})
	ectx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ectx) }()
	t.Cleanup(func() { stop(); <-done })
	startWorker(t, base, cfg("other"))

	j := waitStatus(t, base, id, drover.StatusSucceeded)
	if n := overlap.max(); n > 1 {
		t.Errorf("%d handlers of the job ran at once; job: %s", n, describe(j))
	}
}

// splitLeaseServers serves one SQLite database through two servers set to
// different leases, as in a rolling change of the lease: claims go to the one at
// claimLease, heartbeats to the one at beatLease.
func splitLeaseServers(t *testing.T, claimLease, beatLease time.Duration) (*drover.Client, *httptest.Server) {
	t.Helper()
	c := newClient(t, "sqlite", nil)
	claims := server.New(c, server.Config{LeaseDuration: claimLease})
	beats := server.New(c, server.Config{LeaseDuration: beatLease})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/internal/heartbeat" {
			beats.ServeHTTP(w, r)
			return
		}
		claims.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { hs.Close(); claims.Close(); beats.Close() })
	return c, hs
}

// TestRemoteHeartbeatPacedByTheLeaseItRenewed: a remote worker paces its
// heartbeats by the lease length each heartbeat's answer gives, not only the
// claim's. Two servers over one database set differently (a rolling change
// of the lease): heartbeats answered by the one at 1.5s came two seconds
// apart, the lease ran out between them, and the job ran on another worker
// beside the first. (A heartbeat held up past the lease on a loaded machine
// ends the handler, and the job runs again, but never beside it.)
func TestRemoteHeartbeatPacedByTheLeaseItRenewed(t *testing.T) {
	ctx := context.Background()
	c, hs := splitLeaseServers(t, 6*time.Second, 1500*time.Millisecond)

	var overlap overlapCounter
	workers := func() *drover.Workers {
		ws := drover.NewWorkers()
		drover.Register(ws, "pay", func(ctx context.Context, j *drover.Job, _ struct{}) (any, error) {
			overlap.enter()
			defer overlap.leave()
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-time.After(4 * time.Second): // renewed from 1.5s to 1.5s
				return "paid", nil
			}
		})
		return ws
	}
	remote, err := drover.NewRemoteWorker(drover.RemoteConfig{URL: hs.URL, WaitSeconds: -1},
		&drover.WorkerConfig{ID: "remote", Workers: workers(), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = remote.Stop(sctx)
	})
	id := enqueue(t, c, "pay", nil, nil).ID
	waitStatus(t, c, id, drover.StatusRunning)

	eng := drover.NewEngine(c, &drover.EngineConfig{LeaderTTL: time.Second, ReapInterval: 20 * time.Millisecond})
	ectx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ectx) }()
	t.Cleanup(func() { stop(); <-done })
	startWorker(t, c, &drover.WorkerConfig{ID: "other", Workers: workers(), LeaseDuration: 6 * time.Second,
		PollInterval: 20 * time.Millisecond})

	j := waitStatus(t, c, id, drover.StatusSucceeded)
	if n := overlap.max(); n > 1 {
		t.Errorf("%d handlers of the job ran at once: %s", n, describe(j))
	}
}

// slowClaimAnswer commits a claim, and its answer then takes 700ms to arrive.
type slowClaimAnswer struct{ driver.Driver }

func (s slowClaimAnswer) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	jobs, err := s.Driver.JobClaim(ctx, p)
	if len(jobs) > 0 {
		time.Sleep(700 * time.Millisecond)
	}
	return jobs, err
}

// TestHandlerNotCalledPastItsTimeout: a claim's answer that arrives after the
// job's timeout (counted from the lease's start) and its grace does not call
// the handler. It was called all the same, after its attempt had been
// reported abandoned and the job given back to run again.
func TestHandlerNotCalledPastItsTimeout(t *testing.T) {
	base := newClient(t, "sqlite", nil)
	slow, err := drover.NewClient(slowClaimAnswer{base.Driver()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	ws := drover.NewWorkers()
	drover.Register(ws, "pay", func(ctx context.Context, j *drover.Job, _ struct{}) (any, error) {
		calls.Add(1)
		return "paid", nil
	})
	startWorker(t, slow, fastWorkerConfig(ws)) // grace 500ms
	id := enqueue(t, base, "pay", nil, &drover.EnqueueOpts{Timeout: 100 * time.Millisecond, MaxAttempts: 1}).ID
	j := waitStatus(t, base, id, drover.StatusFailed, drover.StatusSucceeded)
	if n := calls.Load(); n != 0 || j.Status != drover.StatusFailed {
		t.Errorf("the handler was called %d times, after its timeout and grace had run out: %s", n, describe(j))
	}
	if !strings.Contains(j.Error, "timed out after 100ms") || !strings.Contains(j.Error, "not started") {
		t.Errorf("error = %q, want the timeout, saying the handler was not started", j.Error)
	}
}

// TestTimedOutHandlerGraceFitsTheLeaseItRenewed: a remote worker gives a
// timed-out handler a grace that fits the lease its heartbeats renewed, not
// only the claim's. The database renews a timed-out job's lease no further
// than its timeout plus the renewing lease; the grace, half the claim's
// lease (3s here), outlived a renewal at a server set to 1s: a handler that
// took 1.4s to stop after its timeout, well within that grace, still ran
// when the reaper requeued the job and another worker started it.
func TestTimedOutHandlerGraceFitsTheLeaseItRenewed(t *testing.T) {
	c, hs := splitLeaseServers(t, 3*time.Second, time.Second)

	var overlap overlapCounter
	var remoteRuns atomic.Int32
	otherRan := make(chan struct{})
	var otherOnce sync.Once
	remoteWorkers := drover.NewWorkers()
	drover.Register(remoteWorkers, "pay", func(ctx context.Context, j *drover.Job, _ struct{}) (any, error) {
		overlap.enter()
		defer overlap.leave()
		if remoteRuns.Add(1) > 1 { // it may claim the retry too: done at once then
			return "paid", nil
		}
		<-ctx.Done()
		select { // winding down after its timeout: the other worker's start ends it early
		case <-otherRan:
		case <-time.After(1400 * time.Millisecond):
		}
		return nil, context.Cause(ctx)
	})
	startRemoteWorker(t, drover.RemoteConfig{URL: hs.URL, WaitSeconds: -1},
		&drover.WorkerConfig{ID: "remote", Workers: remoteWorkers, PollInterval: 20 * time.Millisecond})
	id := enqueue(t, c, "pay", nil, &drover.EnqueueOpts{Timeout: 1500 * time.Millisecond, MaxAttempts: 5}).ID
	waitStatus(t, c, id, drover.StatusRunning)

	runEngine(t, c)
	otherWorkers := drover.NewWorkers()
	drover.Register(otherWorkers, "pay", func(ctx context.Context, j *drover.Job, _ struct{}) (any, error) {
		overlap.enter()
		defer overlap.leave()
		otherOnce.Do(func() { close(otherRan) })
		return "paid", nil
	})
	startWorker(t, c, &drover.WorkerConfig{ID: "other", Workers: otherWorkers, LeaseDuration: 3 * time.Second,
		PollInterval: 20 * time.Millisecond})

	j := waitStatus(t, c, id, drover.StatusSucceeded)
	if n := overlap.max(); n > 1 {
		t.Errorf("%d handlers of the job ran at once: %s", n, describe(j))
	}
}
