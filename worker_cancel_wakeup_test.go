package drover_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/server"
)

// A cancel reaches a running handler at once, through the cancel's wake-up
// (driver.CanceledWakeup), not at the job's next heartbeat, as River's
// worker hears it. The heartbeat interval here is half an hour, so a handler
// that stops within the test's wait was stopped by the wake-up. Two jobs: one
// canceled before its heartbeat loop started (the wake-up starts it), and one
// whose loop runs already (started by a wake-up of a job that was not
// canceled, which costs a heartbeat and changes nothing else); and a third
// canceled while the worker's graceful Stop waits for it.
//
// On PostgreSQL the cancel is made through another driver, as by another
// process (the server, the CLI): it reaches the worker by NOTIFY. SQLite's
// wake-ups reach the workers of the process that cancels, so the cancel there
// goes through the worker's own client, as in `drover dev`.
func TestCancelReachesARunningHandlerAtOnce(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		url := testdb.URL(t, kind)
		c, err := drover.NewClient(testdb.OpenURL(t, kind, url), nil)
		if err != nil {
			t.Fatal(err)
		}
		canceler := c
		if kind == "postgres" {
			if canceler, err = drover.NewClient(testdb.OpenURL(t, kind, url), nil); err != nil {
				t.Fatal(err)
			}
		}
		cancelsAtOnce(t, c, canceler, false, func(cfg *drover.WorkerConfig) *drover.Worker { return startWorker(t, c, cfg) })
	})
}

// The same through a server, to a remote worker: the server's long poll of
// task-cancels tells it, where its heartbeats are half an hour apart (the
// server's lease is an hour, and a remote worker paces them by it).
func TestRemoteCancelReachesARunningHandlerAtOnce(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{LeaseDuration: time.Hour})
		cancelsAtOnce(t, ts.c, ts.c, true, func(cfg *drover.WorkerConfig) *drover.Worker {
			return startRemoteWorker(t, drover.RemoteConfig{URL: ts.url}, cfg)
		})
	})
}

// cancelsAtOnce runs two jobs on the worker start starts (with heartbeats half
// an hour apart) and cancels each through canceler while its handler runs;
// again, the cancel's pointer is sent again until the handler stops.
func cancelsAtOnce(t *testing.T, c, canceler *drover.Client, again bool, start func(*drover.WorkerConfig) *drover.Worker) {
	t.Helper()
	var mu sync.Mutex
	started := map[int64]chan struct{}{}
	stopped := map[int64]chan error{}
	chans := func(id int64) (chan struct{}, chan error) {
		mu.Lock()
		defer mu.Unlock()
		if started[id] == nil {
			started[id], stopped[id] = make(chan struct{}), make(chan error, 1)
		}
		return started[id], stopped[id]
	}
	ws := drover.NewWorkers()
	drover.Register(ws, "long", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
		s, e := chans(job.ID)
		close(s)
		<-ctx.Done()
		e <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	cfg := fastWorkerConfig(ws)
	cfg.LeaseDuration, cfg.HeartbeatInterval = time.Hour, 30*time.Minute
	obs := &outcomes{finished: make(chan string, 4), lost: make(chan int64, 4)}
	cfg.Observer = obs
	w := start(cfg)

	cancelNow := func(id int64, what string) {
		t.Helper()
		if _, err := canceler.Cancel(context.Background(), id); err != nil {
			t.Fatalf("Cancel of the running job %d: %v", id, err)
		}
		_, e := chans(id)
		if again {
			// A remote worker hears a pointer only while its long poll is
			// at the server, and it may be between two: the cancel's
			// pointer is sent again until the handler stops.
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for until := time.Now().Add(waitTimeout); len(e) == 0 && time.Now().Before(until); <-tick.C {
				if err := canceler.Driver().WakeupPublish(context.Background(), []string{driver.CanceledWakeup(id)}); err != nil {
					t.Fatalf("WakeupPublish: %v", err)
				}
			}
		}
		cause := waitChan(t, e, "the handler of job "+what+" to stop, long before its next heartbeat")
		if cause == nil || !strings.Contains(cause.Error(), "canceled by an operator") {
			t.Errorf("job %s: handler context's cause = %v, want the operator's cancel", what, cause)
		}
		if got := waitChan(t, obs.finished, "the observer to hear of the canceled job"); got != "canceled" {
			t.Errorf("job %s: observer's outcome %q, want canceled", what, got)
		}
	}

	// Canceled before its first heartbeat, half an hour away.
	first := enqueue(t, c, "long", nil, nil)
	s, _ := chans(first.ID)
	waitChan(t, s, "the first handler to start")
	cancelNow(first.ID, "canceled before its heartbeat loop started")

	// Its heartbeat loop running (a wake-up of it, not canceled, started
	// the loop, which sent a heartbeat: the job's rev moved), then
	// canceled: the loop's next heartbeat is half an hour away.
	second := enqueue(t, c, "long", nil, nil)
	s, _ = chans(second.ID)
	waitChan(t, s, "the second handler to start")
	before := getJob(t, c, second.ID)
	beat := time.NewTicker(250 * time.Millisecond) // a wake-up is best effort: sent again until heard
	defer beat.Stop()
	deadline := time.After(waitTimeout)
	for j := before; j.Rev == before.Rev; j = getJob(t, c, second.ID) {
		if err := canceler.Driver().WakeupPublish(context.Background(), []string{driver.CanceledWakeup(second.ID)}); err != nil {
			t.Fatalf("WakeupPublish: %v", err)
		}
		select {
		case <-beat.C:
		case <-deadline:
			t.Fatalf("job %d: no heartbeat within %s of a wake-up naming it; rev %d", second.ID, waitTimeout, j.Rev)
		}
	}
	if j := getJob(t, c, second.ID); j.Status != drover.StatusRunning {
		t.Fatalf("job %d after a wake-up that named it, not canceled: %s, want running", second.ID, describe(j))
	}
	cancelNow(second.ID, "canceled with its heartbeat loop running")

	// Canceled while the worker's graceful Stop waits for it: Stop has
	// stopped claiming, and still hears cancels.
	third := enqueue(t, c, "long", nil, nil)
	s, _ = chans(third.ID)
	waitChan(t, s, "the third handler to start")
	stop := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		stop <- w.Stop(ctx)
	}()
	waitFor(t, "the worker to stop claiming", func() bool { return drover.Draining(w) })
	cancelNow(third.ID, "canceled while the worker's Stop waited for it")
	if err := waitChan(t, stop, "Stop to return once the canceled job ended"); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if n, l := w.Stats().Canceled.Load(), w.Stats().LeaseLost.Load(); n != 3 || l != 0 {
		t.Errorf("stats: canceled %d, lease lost %d; want 3, 0", n, l)
	}
	for _, id := range []int64{first.ID, second.ID, third.ID} {
		if j := getJob(t, c, id); j.Status != drover.StatusCanceled || j.Error != "" || len(j.Errors) != 0 {
			t.Errorf("job %d: %s, want canceled and untouched", id, describe(j))
		}
	}
}
