package drover_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/server"
)

// A worker that leaves while its task-claim's statement runs on PostgreSQL
// (its Stop, its own timeout, a dropped connection): the claim is not canceled
// with it (a canceled statement can still commit while the call reports the
// cancel, and its job was then never given back), and the job it claimed is
// given back, since the worker cannot receive it: queued, no execution used.
func TestTaskClaimOfADepartedWorkerGivesItsJobBack(t *testing.T) {
	ctx := context.Background()
	url := testdb.URL(t, "postgres")
	appName := fmt.Sprintf("review9-%d", time.Now().UnixNano()) // to find our own claim among other tests'

	// One connection, so the claim below runs where the warm-up prepared it.
	drv := testdb.OpenURL(t, "postgres", url+"&pool_max_conns=1&application_name="+appName)
	c, err := drover.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := server.New(c, server.Config{LeaseDuration: time.Minute})
	handlerDone := make(chan struct{}, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r)
		if r.URL.Path == "/internal/task-claim" {
			handlerDone <- struct{}{}
		}
	}))
	t.Cleanup(func() { hs.Close(); s.Close() })

	// Warm-up: empty claims prepare the claim statement on the connection.
	for range 3 {
		resp, err := http.Post(hs.URL+"/internal/task-claim", "application/json",
			bytes.NewReader([]byte(`{"worker_id":"w0","queues":["default"],"limit":1}`)))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("warm-up claim: %v %v", resp, err)
		}
		resp.Body.Close()
		<-handlerDone
	}
	id := enqueue(t, c, "work", nil, nil).ID

	// Another session holds a lock that the claim's event insert waits for, so
	// the statement is under way in PostgreSQL when the worker leaves: a slow
	// database, as under load.
	locker, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE drover_job_events IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}

	probe, err := pgx.Connect(ctx, url) // outside any transaction: fresh pg_stat_activity
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close(ctx)
	reqCtx, leave := context.WithCancel(ctx)
	clientDone := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(reqCtx, "POST", hs.URL+"/internal/task-claim",
			bytes.NewReader([]byte(`{"worker_id":"w1","queues":["default"],"limit":1}`)))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		clientDone <- err
	}()
	waitFor(t, "the claim to wait on the lock in PostgreSQL", func() bool {
		var n int
		_ = probe.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND application_name = $1`, appName).Scan(&n)
		return n > 0
	})
	leave() // the worker goes away mid-claim
	if err := waitChan(t, clientDone, "the client to give up"); err == nil {
		t.Fatal("the claim answered although the client left")
	}
	if err := tx.Commit(ctx); err != nil { // the database catches up
		t.Fatal(err)
	}
	waitChan(t, handlerDone, "the task-claim handler to return")
	j := getJob(t, c, id)
	evs, _ := drv.JobEvents(ctx, id)
	for _, e := range evs {
		t.Logf("event %s %s->%s", e.Type, e.From, e.To)
	}
	if j.Status != drover.StatusQueued || j.Executions != 0 {
		t.Errorf("job whose claimer left mid-claim: %s owner=%q; want queued (given back), "+
			"not running under a lease nobody holds", describe(j), j.Owner)
	}
}

// A graceful Stop cancels a claim under way. When the server had committed it
// (its answer on the way, held here a second as a proxy or a slow link would),
// the answer was dropped, the server kept the task (a claim with a request_id
// is left to its resend), and the stopping worker never resent it: the job sat
// running under the stopped worker until its lease expired, and the reaper
// failed a max_attempts 1 job that never ran (helper-46). The worker now
// collects the claim (replay_only) and gives its task back unrun.
func TestStopCollectsAClaimUnderWay(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		runEngine(t, c)
		url := lateFirstClaimServer(t, c, serverLease, time.Second)
		var runs atomic.Int32
		ws := drover.NewWorkers()
		drover.Register(ws, "pay", func(context.Context, *drover.Job, struct{}) (any, error) {
			runs.Add(1)
			return "paid", nil
		})
		w := newRemoteWorker(t, drover.RemoteConfig{URL: url, WaitSeconds: 5}, fastWorkerConfig(ws))
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		id := enqueue(t, c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		// The server has claimed it for the worker; its answer is on its way.
		waitJob(t, c, id, "claimed for the worker", func(j *drover.Job) bool { return j.Status == drover.StatusRunning })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed, drover.StatusQueued)
		if runs.Load() != 0 || j.Status != drover.StatusQueued || j.Executions != 0 || j.Owner != "" {
			t.Errorf("after a graceful Stop with its claim under way: %s, handler runs %d; want it given back unrun (queued, no execution spent)",
				describe(j), runs.Load())
		}
	})
}

// lagProxy is a loopback TCP proxy that passes bytes both ways, but a
// client's close reaches the server lag later: a load balancer or reverse
// proxy that passes on a client's abort late, or not until the answer.
func lagProxy(t *testing.T, upstream string, lag time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	go func() {
		for {
			cc, err := ln.Accept()
			if err != nil {
				return
			}
			uc, err := net.Dial("tcp", upstream)
			if err != nil {
				cc.Close()
				continue
			}
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(cc, uc)
				cc.Close()
			}()
			go func() {
				defer wg.Done()
				_, _ = io.Copy(uc, cc)
				timer := time.NewTimer(lag) // the client's close, passed on late
				<-timer.C
				uc.Close()
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// A worker's Stop collects its long poll's request_id, which closes it when
// no claim of it was made: behind a proxy that passed the worker's disconnect
// on late, the long poll ran on at the server and claimed the next job for
// the stopped worker, where it sat until its lease expired and the reaper
// failed it unrun (helper-49).
func TestStopClosesALongPollTheServerStillHolds(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		runEngine(t, c)
		var inClaim atomic.Int64
		hs := wrappedServer(t, c, func(s http.Handler, w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/internal/task-claim" {
				inClaim.Add(1)
				defer inClaim.Add(-1)
			}
			s.ServeHTTP(w, r)
		})
		url := lagProxy(t, hs.Listener.Addr().String(), 3*time.Second)
		ws := drover.NewWorkers()
		drover.Register(ws, "pay", func(context.Context, *drover.Job, struct{}) (any, error) { return "paid", nil })
		w := newRemoteWorker(t, drover.RemoteConfig{URL: url, WaitSeconds: 10}, fastWorkerConfig(ws))
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a long poll waiting at the server", func() bool { return inClaim.Load() > 0 })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		id := enqueue(t, c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		// The long poll tries again at least once a second until the proxy
		// passes the disconnect on (3s): ended, it has had its chances.
		waitFor(t, "the stopped worker's long poll to end at the server", func() bool { return inClaim.Load() == 0 })
		if j := getJob(t, c, id); j.Status != drover.StatusQueued || j.Attempt != 0 {
			t.Errorf("a job enqueued after the worker stopped: %s; want it queued for another worker, never claimed", describe(j))
		}
	})
}

// slowCommitAtShutdown serves a fresh PostgreSQL database whose claims and
// snoozes take a second and a half to commit (a slow synchronous standby),
// with a lease of a minute; enqueues a max_attempts 1 job; sends a claim
// without a request_id (it is optional); and shuts the server down, with a
// deadline of 300 ms, while the claim's COMMIT runs. It returns once
// ListenAndServe has, with the job's id.
func slowCommitAtShutdown(t *testing.T) (c *drover.Client, s *server.Server, drv driver.Driver, url string, id int64) {
	t.Helper()
	ctx := context.Background()
	url = testdb.URL(t, "postgres")
	drv = testdb.OpenURL(t, "postgres", url)
	c, err := drover.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer ddl.Close(ctx)
	for _, q := range []string{
		// A claim (queued → claimed or running) and a snooze (running →
		// queued, an execution given back) of a job row. (A worker's claim
		// writes no event row: pgdriver's migration 012.)
		`CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN PERFORM pg_sleep(1.5); RETURN NULL; END $$`,
		`CREATE CONSTRAINT TRIGGER slow_commit AFTER UPDATE ON drover_jobs
		 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
		 WHEN ((OLD.status IN ('queued', 'stalled') AND NEW.status IN ('claimed', 'running'))
		       OR (OLD.status = 'running' AND NEW.status = 'queued' AND NEW.executions < OLD.executions))
		 EXECUTE FUNCTION slow_commit()`,
	} {
		if _, err := ddl.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	id = enqueue(t, c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
	s = server.New(c, server.Config{LeaseDuration: time.Minute})
	srvCtx, shutdown := context.WithCancel(ctx)
	addr, served := make(chan net.Addr, 1), make(chan error, 1)
	go func() {
		served <- server.ListenAndServe(srvCtx, s, server.ListenConfig{
			Addr: "127.0.0.1:0", ShutdownTimeout: 300 * time.Millisecond, Ready: func(a net.Addr) { addr <- a },
		}, nil)
	}()
	base := "http://" + waitChan(t, addr, "the server to listen").String()
	go func() {
		if resp, err := http.Post(base+"/internal/task-claim", "application/json",
			strings.NewReader(`{"worker_id":"w1","queues":["default"],"limit":1}`)); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "the claim's COMMIT under way", func() bool {
		var n int
		_ = ddl.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()`).Scan(&n)
		return n > 0
	})
	shutdown()
	waitChan(t, served, "ListenAndServe to return")
	return c, s, drv, url, id
}

// At a shutdown's deadline a claim's COMMIT runs on (it is not canceled), and
// its worker, cut off, cannot receive it: a claim without a request_id is then
// given back. The give-back was canceled with the server's life, and the job
// sat leased to the departed worker until its lease expired (helper-49 F2).
// The give-back's COMMIT is slow too: canceled, it is canceled for certain.
func TestGiveBackOutlivesTheShutdownsDeadline(t *testing.T) {
	c, s, _, _, id := slowCommitAtShutdown(t)
	defer s.Close()
	// The lease is a minute: its expiry is not what requeues the job here.
	j := waitJob(t, c, id, "claimed, then given back", func(j *drover.Job) bool { return j.Attempt == 1 && j.Status != drover.StatusRunning })
	if j.Status != drover.StatusQueued || j.Executions != 0 || j.Attempt != 1 {
		t.Errorf("job claimed for a worker the shutdown cut off: %s; want it claimed (attempt 1), then given back (queued, no execution spent)", describe(j))
	}
}

// A stopping worker's collect waits for its answer up to a lease, and a
// collect whose worker left has its tasks given back by the server. Given up
// at 2 s (an answer on a slow link, or one that waited for the claim's slow
// COMMIT), the committed job sat leased to the stopped worker until the
// reaper failed it unrun (helper-50 F1).
func TestStopCollectWaitsForASlowAnswer(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		runEngine(t, c)
		s := server.New(c, server.Config{LeaseDuration: 10 * time.Second, Backoff: func(int) time.Duration { return 0 }})
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, r)
			if r.URL.Path == "/internal/task-claim" && bytes.Contains(rec.Body.Bytes(), []byte(`"task_id"`)) {
				time.Sleep(2500 * time.Millisecond) // a slow link: an answer with a task takes 2.5 s
			}
			writeRecorded(w, rec)
		}))
		t.Cleanup(func() { hs.Close(); s.Close() })
		var runs atomic.Int32
		ws := drover.NewWorkers()
		drover.Register(ws, "pay", func(context.Context, *drover.Job, struct{}) (any, error) {
			runs.Add(1)
			return "paid", nil
		})
		cfg := fastWorkerConfig(ws)
		cfg.LeaseDuration = 30 * time.Second // the default: the collect's bound until the server has said its lease
		w := newRemoteWorker(t, drover.RemoteConfig{URL: hs.URL, WaitSeconds: 5}, cfg)
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		id := enqueue(t, c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		waitJob(t, c, id, "claimed for the worker", func(j *drover.Job) bool { return j.Status == drover.StatusRunning })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		j := waitJob(t, c, id, "given back or failed", func(j *drover.Job) bool { return j.Status != drover.StatusRunning })
		if runs.Load() != 0 || j.Status != drover.StatusQueued || j.Executions != 0 {
			t.Errorf("after a graceful Stop whose collect answer took 2.5 s: %s, handler runs %d; want it given back unrun (queued, no execution spent)",
				describe(j), runs.Load())
		}
	})
}

// drover server closes its Server before its driver: Close waits for a
// claim under way and its give-back. The give-back of a claim committed at
// the shutdown's deadline met a closed pool, and its job sat leased to the
// cut-off worker (helper-50 F2).
func TestCloseWaitsForAGiveBack(t *testing.T) {
	_, s, drv, url, id := slowCommitAtShutdown(t)
	s.Close() // as drover server does, then its driver's Close
	_ = drv.Close()
	c2, err := drover.NewClient(testdb.OpenURL(t, "postgres", url), nil)
	if err != nil {
		t.Fatal(err)
	}
	if j := getJob(t, c2, id); j.Status != drover.StatusQueued || j.Executions != 0 || j.Attempt != 1 {
		t.Errorf("job claimed for a worker the shutdown cut off, after Close and the driver's: %s; want it given back (queued, attempt 1, no execution spent)", describe(j))
	}
}
