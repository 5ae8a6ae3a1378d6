package drover_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
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

// serverLease is the lease the test servers give; remote workers in these tests
// use the same LeaseDuration (fastWorkerConfig).
const serverLease = 2 * time.Second

// testServer is the real HTTP API on a loopback port over a fresh database.
type testServer struct {
	c      *drover.Client // of the same database, to enqueue and inspect
	url    string
	claims atomic.Int64 // task-claim requests in flight (long-polls)
}

// startServer starts a server over a fresh database of kind. Unless cfg says
// otherwise, its lease is serverLease and it retries at once.
func startServer(t *testing.T, kind string, cfg server.Config) *testServer {
	t.Helper()
	ts := &testServer{c: newClient(t, kind, nil)}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = serverLease
	}
	if cfg.Backoff == nil {
		cfg.Backoff = func(int) time.Duration { return 0 }
	}
	s := server.New(ts.c, cfg)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/internal/task-claim" {
			ts.claims.Add(1)
			defer ts.claims.Add(-1)
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { hs.Close(); s.Close() })
	ts.url = hs.URL
	return ts
}

// newRemoteWorker builds a remote worker or fails the test.
func newRemoteWorker(t *testing.T, rc drover.RemoteConfig, cfg *drover.WorkerConfig) *drover.Worker {
	t.Helper()
	w, err := drover.NewRemoteWorker(rc, cfg)
	if err != nil {
		t.Fatalf("NewRemoteWorker: %v", err)
	}
	return w
}

// startRemoteWorker starts a remote worker and stops it (gracefully, bounded) at
// cleanup, before the server closes.
func startRemoteWorker(t *testing.T, rc drover.RemoteConfig, cfg *drover.WorkerConfig) *drover.Worker {
	t.Helper()
	w := newRemoteWorker(t, rc, cfg)
	if err := w.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("Stop at cleanup: %v", err)
		}
	})
	return w
}

// logBuffer collects a worker's log lines, safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// waitFor polls cond until it holds, failing the test after waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
		}
		<-tick.C
	}
}

func TestNewRemoteWorkerValidation(t *testing.T) {
	ws := drover.NewWorkers()
	for _, tc := range []struct {
		name, url string
		hc        *http.Client
		wantField string
	}{
		{"empty", "", nil, "server"},
		{"blank", "   ", nil, "server"},
		{"no scheme", "127.0.0.1:7420", nil, "server"},
		{"wrong scheme", "ftp://127.0.0.1:7420", nil, "server"},
		{"no host", "http://", nil, "server"},
		{"query", "http://127.0.0.1:7420/?x=1", nil, "server"},
		{"credentials", "http://user:pw@127.0.0.1:7420", nil, "server"},
		{"client timeout shorter than the long-poll", "http://127.0.0.1:7420", &http.Client{Timeout: 5 * time.Second}, "http_client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := drover.NewRemoteWorker(drover.RemoteConfig{URL: tc.url, HTTPClient: tc.hc}, &drover.WorkerConfig{Workers: ws})
			wantInvalid(t, err, tc.wantField)
		})
	}
	// A wait past the bound; the largest wrapped into a negative wait, which
	// read as none.
	for _, n := range []int{drover.MaxWaitSeconds + 1, 9_300_000_000, math.MaxInt} {
		_, err := drover.NewRemoteWorker(drover.RemoteConfig{URL: "http://127.0.0.1:7420", WaitSeconds: n}, &drover.WorkerConfig{Workers: ws})
		wantInvalid(t, err, "wait_seconds")
	}
	for _, n := range []int{drover.MaxWaitSeconds, 60, -1} {
		if _, err := drover.NewRemoteWorker(drover.RemoteConfig{URL: "http://127.0.0.1:7420", WaitSeconds: n}, &drover.WorkerConfig{Workers: ws}); err != nil {
			t.Errorf("NewRemoteWorker with WaitSeconds %d: %v, want no error", n, err)
		}
	}
	if _, err := drover.NewRemoteWorker(drover.RemoteConfig{URL: "http://127.0.0.1:7420"}, nil); err == nil {
		t.Error("NewRemoteWorker with a nil worker config: got no error, want one")
	}
	for _, ok := range []string{"http://127.0.0.1:7420", "https://drover.example.com/api/", " http://localhost:1 "} {
		if _, err := drover.NewRemoteWorker(drover.RemoteConfig{URL: ok}, &drover.WorkerConfig{Workers: ws}); err != nil {
			t.Errorf("NewRemoteWorker(%q): %v, want no error", ok, err)
		}
	}
}

func TestRemoteErrorMatchesSentinels(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   error
	}{
		{409, drover.ErrLeaseLost},
		{404, drover.ErrNotFound},
		{401, drover.ErrUnauthorized},
		{403, drover.ErrUnauthorized},
		{400, drover.ErrInvalidArgument},
	} {
		err := error(&drover.RemoteError{Method: "POST", Path: "/x", Status: tc.status, Code: "c", Message: "m"})
		if !errors.Is(err, tc.want) {
			t.Errorf("errors.Is(RemoteError{Status: %d}, %v) = false, want true", tc.status, tc.want)
		}
	}
	// A request_id another call used: refused, but no lost lease.
	reused := error(&drover.RemoteError{Method: "POST", Path: "/x", Status: 409, Code: "conflict", Message: "invalid request_id: …"})
	if !errors.Is(reused, drover.ErrRequestReused) || !errors.Is(reused, drover.ErrInvalidArgument) || errors.Is(reused, drover.ErrLeaseLost) {
		t.Errorf("RemoteError{Status: 409, Code: conflict}: ErrRequestReused %v, ErrInvalidArgument %v, ErrLeaseLost %v; want true, true, false",
			errors.Is(reused, drover.ErrRequestReused), errors.Is(reused, drover.ErrInvalidArgument), errors.Is(reused, drover.ErrLeaseLost))
	}
	err := error(&drover.RemoteError{Method: "POST", Path: "/x", Status: 422, Code: "invalid_transition", Message: "no"})
	for _, s := range []error{drover.ErrLeaseLost, drover.ErrNotFound, drover.ErrUnauthorized, drover.ErrInvalidArgument} {
		if errors.Is(err, s) {
			t.Errorf("errors.Is(RemoteError{Status: 422}, %v) = true, want false", s)
		}
	}
	if got := err.Error(); !strings.Contains(got, "422") || !strings.Contains(got, "invalid_transition") || !strings.Contains(got, "no") {
		t.Errorf("RemoteError.Error() = %q, want the status, code and message", got)
	}
}

func TestRemoteWorkerTypedHandler(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{})
		c, url := ts.c, ts.url
		ws := drover.NewWorkers()
		var seen atomic.Pointer[drover.Job]
		drover.Register(ws, "add", func(ctx context.Context, job *drover.Job, args addArgs) (any, error) {
			seen.Store(job)
			return addResult{Sum: args.A + args.B}, nil
		})
		drover.Register(ws, "nothing", func(ctx context.Context, job *drover.Job, args struct{}) (any, error) {
			return nil, nil
		})
		cfg := fastWorkerConfig(ws)
		cfg.ID = "remote-1"
		startRemoteWorker(t, drover.RemoteConfig{URL: url}, cfg)

		id := enqueue(t, c, "add", addArgs{A: 2, B: 40}, &drover.EnqueueOpts{Priority: 3, Timeout: 7 * time.Second}).ID
		bad := enqueue(t, c, "add", map[string]string{"A": "not a number"}, &drover.EnqueueOpts{MaxAttempts: 5}).ID
		empty := enqueue(t, c, "nothing", nil, nil).ID

		j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded {
			t.Fatalf("add job: %s, want succeeded", describe(j))
		}
		wantJSON(t, "result", j.Result, addResult{Sum: 42})
		if j.Attempt != 1 || j.Executions != 1 || j.Error != "" || len(j.Errors) != 0 || j.FinishedAt == nil {
			t.Errorf("succeeded job: %s finished_at=%v, want one clean attempt", describe(j), j.FinishedAt)
		}
		// What the handler saw came from the claim answer.
		h := seen.Load()
		if h == nil {
			t.Fatal("handler saw no job")
		}
		if h.ID != id || h.Kind != "add" || h.Queue != drover.DefaultQueue || h.Priority != 3 || h.Attempt != 1 ||
			h.Executions != 1 || h.MaxAttempts != drover.DefaultMaxAttempts || h.Timeout != 7*time.Second ||
			h.Status != drover.StatusRunning || h.Owner != "remote-1" || h.CreatedAt.IsZero() {
			t.Errorf("handler's job = {id=%d kind=%q queue=%q priority=%d attempt=%d executions=%d max=%d timeout=%s status=%s owner=%q created=%s}, "+
				"want {id=%d kind=add queue=default priority=3 attempt=1 executions=1 max=%d timeout=7s status=running owner=remote-1 created set}",
				h.ID, h.Kind, h.Queue, h.Priority, h.Attempt, h.Executions, h.MaxAttempts, h.Timeout, h.Status, h.Owner, h.CreatedAt,
				id, drover.DefaultMaxAttempts)
		}

		j = waitStatus(t, c, bad, drover.StatusFailed, drover.StatusSucceeded)
		if j.Status != drover.StatusFailed || j.Executions != 1 || !strings.Contains(j.Error, "decode args") {
			t.Errorf("undecodable args: %s, want failed after 1 execution with a decode error", describe(j))
		}

		j = waitStatus(t, c, empty, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || string(j.Result) != "null" {
			t.Errorf("nil result: %s, want succeeded with result null", describe(j))
		}
	})
}

func TestRemoteWorkerRetriesWithServerBackoff(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		// The server retries at once; the worker's own backoff of an hour must not apply.
		ts := startServer(t, kind, server.Config{Backoff: func(int) time.Duration { return 0 }})
		c, url := ts.c, ts.url
		ws := drover.NewWorkers()
		drover.Register(ws, "flaky", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			if job.Attempt < 3 {
				return nil, fmt.Errorf("flake on attempt %d", job.Attempt)
			}
			return "ok", nil
		}, drover.WithBackoff(func(int) time.Duration { return time.Hour }))
		cfg := fastWorkerConfig(ws)
		cfg.Backoff = func(int) time.Duration { return time.Hour }
		obs := &outcomes{finished: make(chan string, 16), lost: make(chan int64, 16)}
		cfg.Observer = obs
		w := startRemoteWorker(t, drover.RemoteConfig{URL: url}, cfg)

		id := enqueue(t, c, "flaky", nil, &drover.EnqueueOpts{MaxAttempts: 5}).ID
		j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Attempt != 3 || j.Executions != 3 || len(j.Errors) != 2 {
			t.Fatalf("flaky job: %s, want succeeded on attempt 3 after 2 recorded errors", describe(j))
		}
		for i, e := range j.Errors {
			if want := fmt.Sprintf("flake on attempt %d", i+1); e.Error != want || e.Attempt != i+1 {
				t.Errorf("errors[%d] = #%d %q, want #%d %q", i, e.Attempt, e.Error, i+1, want)
			}
		}
		// The server answers the status before the worker counts the outcome.
		obs.wait(t, 3) // retried, retried, succeeded
		if got := w.Stats().Retried.Load(); got != 2 {
			t.Errorf("Stats().Retried = %d, want 2", got)
		}
	})
}

func TestRemoteWorkerRetryDelayIsTheServers(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{Backoff: func(int) time.Duration { return time.Hour }})
		c, url := ts.c, ts.url
		ws := drover.NewWorkers()
		drover.Register(ws, "fails", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			return nil, errors.New("boom")
		}, noBackoff) // the worker's backoff says "at once"; the server's hour wins
		startRemoteWorker(t, drover.RemoteConfig{URL: url}, fastWorkerConfig(ws))

		before := time.Now()
		id := enqueue(t, c, "fails", nil, &drover.EnqueueOpts{MaxAttempts: 3}).ID
		j := waitJob(t, c, id, "retried once", func(j *drover.Job) bool { return len(j.Errors) == 1 })
		if j.Status != drover.StatusQueued || j.Attempt != 1 {
			t.Errorf("after one failure: %s, want queued after attempt 1", describe(j))
		}
		if min := before.Add(50 * time.Minute); j.RunAt.Before(min) {
			t.Errorf("run_at = %s, want at least %s (the server's backoff of 1h)", j.RunAt.Format(time.RFC3339), min.Format(time.RFC3339))
		}
	})
}

func TestRemoteWorkerPermanentAndExhausted(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{})
		c, url := ts.c, ts.url
		ws := drover.NewWorkers()
		drover.Register(ws, "perm", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			return nil, drover.Permanent(errors.New("bad input"))
		})
		drover.Register(ws, "always", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			return nil, fmt.Errorf("fail %d", job.Attempt)
		})
		cfg := fastWorkerConfig(ws)
		obs := &outcomes{finished: make(chan string, 16), lost: make(chan int64, 16)}
		cfg.Observer = obs
		w := startRemoteWorker(t, drover.RemoteConfig{URL: url}, cfg)

		perm := enqueue(t, c, "perm", nil, &drover.EnqueueOpts{MaxAttempts: 5}).ID
		always := enqueue(t, c, "always", nil, &drover.EnqueueOpts{MaxAttempts: 2}).ID

		j := waitStatus(t, c, perm, drover.StatusFailed, drover.StatusSucceeded)
		if j.Status != drover.StatusFailed || j.Attempt != 1 || j.Error != "bad input" {
			t.Errorf("Permanent: %s, want failed on attempt 1 of 5 with error %q", describe(j), "bad input")
		}
		j = waitStatus(t, c, always, drover.StatusFailed, drover.StatusSucceeded)
		if j.Status != drover.StatusFailed || j.Executions != 2 || j.Error != "fail 2" || len(j.Errors) != 2 {
			t.Errorf("exhausted: %s, want failed after 2 executions with error %q", describe(j), "fail 2")
		}
		dlq, err := c.DLQList(context.Background(), "", 0, 10)
		if err != nil {
			t.Fatalf("DLQList: %v", err)
		}
		if len(dlq) != 2 {
			t.Errorf("DLQ holds %d jobs, want 2 (the permanent and the exhausted one)", len(dlq))
		}
		// The server answers the status before the worker counts the outcome.
		obs.wait(t, 3) // failed (perm); retried, failed (always)
		if got := w.Stats().Failed.Load(); got != 2 {
			t.Errorf("Stats().Failed = %d, want 2", got)
		}
	})
}

func TestRemoteWorkerSnooze(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{})
		c, url := ts.c, ts.url
		ws := drover.NewWorkers()
		var calls atomic.Int32
		drover.Register(ws, "snoozy", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			switch calls.Add(1) {
			case 1:
				return nil, drover.Snooze(0) // zero must still be a snooze, not a retry
			case 2:
				return nil, drover.Snooze(100 * time.Millisecond)
			}
			return job.Executions, nil
		})
		cfg := fastWorkerConfig(ws)
		obs := &outcomes{finished: make(chan string, 16), lost: make(chan int64, 16)}
		cfg.Observer = obs
		w := startRemoteWorker(t, drover.RemoteConfig{URL: url}, cfg)

		id := enqueue(t, c, "snoozy", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Attempt != 3 || j.Executions != 1 || len(j.Errors) != 0 {
			t.Fatalf("snoozed job: %s, want succeeded on attempt 3 with 1 execution and no errors (max_attempts 1)", describe(j))
		}
		wantJSON(t, "result", j.Result, 1)
		obs.wait(t, 3) // snoozed, snoozed, succeeded
		if got := w.Stats().Snoozed.Load(); got != 2 {
			t.Errorf("Stats().Snoozed = %d, want 2", got)
		}
		evs, err := c.Events(context.Background(), id)
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		var types []string
		for _, e := range evs {
			types = append(types, string(e.Type))
		}
		if got := strings.Count(strings.Join(types, " "), "snoozed"); got != 2 {
			t.Errorf("events %v hold %d snoozed, want 2", types, got)
		}
	})
}

func TestRemoteWorkerPanicAndTimeout(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{})
		c, url := ts.c, ts.url
		ws := drover.NewWorkers()
		drover.Register(ws, "panics", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			if job.Attempt == 1 {
				panic("kaboom")
			}
			return "recovered", nil
		})
		drover.Register(ws, "slow", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		startRemoteWorker(t, drover.RemoteConfig{URL: url}, fastWorkerConfig(ws))

		p := enqueue(t, c, "panics", nil, &drover.EnqueueOpts{MaxAttempts: 2}).ID
		s := enqueue(t, c, "slow", nil, &drover.EnqueueOpts{MaxAttempts: 1, Timeout: 100 * time.Millisecond}).ID

		j := waitStatus(t, c, p, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Attempt != 2 || len(j.Errors) != 1 {
			t.Fatalf("panicking job: %s, want succeeded on attempt 2 after one error", describe(j))
		}
		if e := j.Errors[0]; e.Error != "panic: kaboom" || !strings.Contains(e.Stack, "remote_worker_test.go") {
			t.Errorf("panic recorded as %q with stack %.200q, want %q with a stack through the handler", e.Error, e.Stack, "panic: kaboom")
		}

		j = waitStatus(t, c, s, drover.StatusFailed, drover.StatusSucceeded)
		if j.Status != drover.StatusFailed || !strings.Contains(j.Error, "timed out after 100ms") {
			t.Errorf("timed-out job: %s, want failed with a timeout error", describe(j))
		}
	})
}

func TestRemoteWorkerOperatorCancel(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{})
		c, url := ts.c, ts.url
		ws := drover.NewWorkers()
		started := make(chan struct{})
		stopped := make(chan error, 1)
		drover.Register(ws, "long", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			close(started)
			<-ctx.Done()
			stopped <- context.Cause(ctx)
			return nil, ctx.Err()
		})
		w := startRemoteWorker(t, drover.RemoteConfig{URL: url}, fastWorkerConfig(ws))

		id := enqueue(t, c, "long", nil, nil).ID
		waitChan(t, started, "the handler to start")
		if _, err := c.Cancel(context.Background(), id); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		cause := waitChan(t, stopped, "the handler's context to end after the cancel")
		if cause == nil || !strings.Contains(cause.Error(), "canceled by an operator") {
			t.Errorf("handler's context ended with cause %v, want the operator cancel", cause)
		}
		waitFor(t, "the worker to drop the canceled job", func() bool { return w.Stats().Canceled.Load() == 1 })
		if n := w.Stats().LeaseLost.Load(); n != 0 {
			t.Errorf("Stats().LeaseLost = %d after a cancel, want 0: a cancel is not a lost lease", n)
		}
		j := getJob(t, c, id)
		if j.Status != drover.StatusCanceled || j.Result != nil || j.Error != "" {
			t.Errorf("canceled job: %s, want canceled with no result and no error", describe(j))
		}
		if got := w.Stats().Succeeded.Load() + w.Stats().Retried.Load() + w.Stats().Failed.Load(); got != 0 {
			t.Errorf("worker reported %d outcomes for a canceled job, want none", got)
		}
	})
}

func TestRemoteWorkerStaleCompletionRejected(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		// A short lease on the server, and heartbeats that never reach it: a
		// broken proxy answers them as if it had renewed the lease. The lease
		// really expires while the handler runs, and the worker believes it
		// holds it.
		// Once the stale completion is rejected, the proxy passes heartbeats
		// on, so the second attempt need not finish within its 300 ms lease.
		ts := startServer(t, kind, server.Config{LeaseDuration: 300 * time.Millisecond})
		c := ts.c
		var lie atomic.Bool
		lie.Store(true)
		lying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/internal/heartbeat" && lie.Load() {
				w.Header().Set("Content-Type", "application/json")
				_, _ = fmt.Fprintf(w, `{"lease_expires_at":%q,"cancel_requested":false}`, time.Now().Add(300*time.Millisecond).UTC().Format(time.RFC3339Nano))
				return
			}
			proxy, err := http.NewRequestWithContext(r.Context(), r.Method, ts.url+r.URL.RequestURI(), r.Body)
			if err != nil {
				t.Error(err)
				return
			}
			proxy.Header = r.Header.Clone()
			resp, err := http.DefaultTransport.RoundTrip(proxy)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
		}))
		t.Cleanup(lying.Close)
		url := lying.URL
		ws := drover.NewWorkers()
		var calls atomic.Int32
		started := make(chan struct{})
		release := make(chan struct{})
		drover.Register(ws, "late", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			if calls.Add(1) == 1 {
				close(started)
				<-release
				return "stale", nil
			}
			return "fresh", nil
		})
		var logs logBuffer
		cfg := fastWorkerConfig(ws)
		cfg.Queues = map[string]int{drover.DefaultQueue: 1} // the busy slot keeps it from reclaiming
		cfg.Logger = logs.logger()
		w := startRemoteWorker(t, drover.RemoteConfig{URL: url}, cfg)

		id := enqueue(t, c, "late", nil, nil).ID
		waitChan(t, started, "the handler to start")
		// The reaper requeues the job for a new attempt while the first handler
		// still runs; the paused queue keeps it there.
		if err := c.PauseQueue(context.Background(), drover.DefaultQueue); err != nil {
			t.Fatalf("PauseQueue: %v", err)
		}
		waitFor(t, "the reaper to take the expired lease", func() bool {
			reaped, err := c.Driver().JobReapExpired(context.Background(), driver.ReapParams{})
			if err != nil {
				t.Fatalf("JobReapExpired: %v", err)
			}
			return len(reaped) == 1 && reaped[0].ID == id
		})
		before := getJob(t, c, id)
		if before.Status != drover.StatusQueued {
			t.Fatalf("after the reap: %s, want queued", describe(before))
		}

		close(release)
		waitFor(t, "the stale completion to be rejected", func() bool { return w.Stats().LeaseLost.Load() == 1 })
		if !strings.Contains(logs.String(), "409 lease_lost") {
			t.Errorf("worker log does not show a 409 lease_lost answer:\n%s", logs.String())
		}
		after := getJob(t, c, id)
		if after.Status != before.Status || after.Rev != before.Rev || after.Attempt != before.Attempt || after.Result != nil {
			t.Errorf("stale completion changed the job:\n before %s rev=%d\n after  %s rev=%d", describe(before), before.Rev, describe(after), after.Rev)
		}
		if got := w.Stats().Succeeded.Load(); got != 0 {
			t.Errorf("Stats().Succeeded = %d after a rejected completion, want 0", got)
		}

		lie.Store(false) // the stale attempt is over
		if err := c.ResumeQueue(context.Background(), drover.DefaultQueue); err != nil {
			t.Fatalf("ResumeQueue: %v", err)
		}
		j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Attempt != 2 {
			t.Errorf("after the new claim: %s, want succeeded on attempt 2", describe(j))
		}
		wantJSON(t, "result", j.Result, "fresh")
	})
}

func TestRemoteWorkerGracefulStop(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{})
		c := ts.c
		ws := drover.NewWorkers()
		started := make(chan struct{}, 1)
		release := make(chan struct{})
		drover.Register(ws, "hold", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			started <- struct{}{}
			<-release
			return "done", nil
		})
		cfg := fastWorkerConfig(ws)
		cfg.Queues = map[string]int{drover.DefaultQueue: 2} // the free slot keeps a long-poll open
		w := newRemoteWorker(t, drover.RemoteConfig{URL: ts.url, WaitSeconds: 30}, cfg)
		if err := w.Start(context.Background()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		id := enqueue(t, c, "hold", nil, nil).ID
		waitChan(t, started, "the handler to start")
		waitFor(t, "a long-poll for the free slot", func() bool { return ts.claims.Load() == 1 })

		stopped := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			stopped <- w.Stop(ctx)
		}()
		// Stop ends the long-poll at once (not after 30s), but waits for the running job.
		waitFor(t, "Stop to end the long-poll", func() bool { return ts.claims.Load() == 0 })
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned (%v) while a job was still running", err)
		default:
		}
		after := enqueue(t, c, "hold", nil, nil).ID

		close(release)
		if err := waitChan(t, stopped, "Stop to return"); err != nil {
			t.Errorf("Stop: %v, want nil", err)
		}
		if j := getJob(t, c, id); j.Status != drover.StatusSucceeded {
			t.Errorf("job running at Stop: %s, want succeeded", describe(j))
		}
		if j := getJob(t, c, after); j.Status != drover.StatusQueued || j.Attempt != 0 {
			t.Errorf("job enqueued during Stop: %s, want queued and never claimed", describe(j))
		}
		if n := ts.claims.Load(); n != 0 {
			t.Errorf("%d claims in flight after Stop, want 0", n)
		}
	})
}

func TestRemoteWorkerHardStop(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{})
		ws := drover.NewWorkers()
		started := make(chan struct{})
		drover.Register(ws, "stubborn", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		// No long-poll: the stop cancels the worker's waiting claim, but the server
		// notices the closed connection asynchronously, and a waiting claim woken
		// by the retry report below could take the requeued job first (it then sits
		// running until its lease expires; see Server.taskClaim). That race is the
		// server's, not the hard stop's this test is about.
		w := newRemoteWorker(t, drover.RemoteConfig{URL: ts.url, WaitSeconds: -1}, fastWorkerConfig(ws))
		if err := w.Start(context.Background()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		id := enqueue(t, ts.c, "stubborn", nil, &drover.EnqueueOpts{MaxAttempts: 3}).ID
		waitChan(t, started, "the handler to start")

		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no patience: running handlers are canceled at once
		if err := w.Stop(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Stop with an ended context = %v, want context.Canceled", err)
		}
		j := getJob(t, ts.c, id)
		if j.Status != drover.StatusQueued || j.Attempt != 1 || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "shutting down") {
			t.Errorf("job interrupted by a hard stop: %s, want queued for a retry with a shutdown error", describe(j))
		}
	})
}

func TestRemoteWorkerLongPollPicksUpNewJobs(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{})
		ws := drover.NewWorkers()
		drover.Register(ws, "add", func(ctx context.Context, job *drover.Job, args addArgs) (any, error) {
			return addResult{Sum: args.A + args.B}, nil
		})
		cfg := fastWorkerConfig(ws)
		cfg.PollInterval = time.Hour // only the long-poll can find the job in time
		startRemoteWorker(t, drover.RemoteConfig{URL: ts.url, WaitSeconds: 30}, cfg)
		waitFor(t, "the worker's long-poll", func() bool { return ts.claims.Load() == 1 })

		for i := range 3 {
			id := enqueue(t, ts.c, "add", addArgs{A: i, B: 1}, nil).ID
			j := waitStatus(t, ts.c, id, drover.StatusSucceeded, drover.StatusFailed)
			if j.Status != drover.StatusSucceeded {
				t.Fatalf("job %d: %s, want succeeded", i, describe(j))
			}
			wantJSON(t, "result", j.Result, addResult{Sum: i + 1})
		}
	})
}

// A remote worker started with a token the server refuses fails at Start,
// loudly, as a Temporal worker does: it ran on, claiming nothing, its only
// sign a log line, while its jobs waited. With the worker token it works.
func TestRemoteWorkerToken(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{WorkerToken: "worker-secret", AdminToken: "admin-secret"})
		ws := drover.NewWorkers()
		drover.Register(ws, "add", func(ctx context.Context, job *drover.Job, args addArgs) (any, error) {
			return addResult{Sum: args.A + args.B}, nil
		})

		id := enqueue(t, ts.c, "add", addArgs{A: 1, B: 2}, nil).ID
		bad := newRemoteWorker(t, drover.RemoteConfig{URL: ts.url, Token: "wrong"}, fastWorkerConfig(ws))
		err := bad.Start(context.Background())
		if !errors.Is(err, drover.ErrUnauthorized) || !strings.Contains(err.Error(), "401 unauthorized") {
			t.Errorf("Start with a wrong token: %v, want the server's 401, matching ErrUnauthorized", err)
		}
		if err == nil {
			_ = bad.Stop(context.Background())
		}
		if j := getJob(t, ts.c, id); j.Status != drover.StatusQueued || j.Attempt != 0 {
			t.Errorf("with a wrong token: %s, want queued and never claimed", describe(j))
		}

		startRemoteWorker(t, drover.RemoteConfig{URL: ts.url, Token: "worker-secret"}, fastWorkerConfig(ws))
		j := waitStatus(t, ts.c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded {
			t.Errorf("with the worker token: %s, want succeeded", describe(j))
		}
	})
}

// A report that the server never answers ends when the lease would have expired:
// the worker gives up on each request (a heartbeat interval at most, then it
// sends it again) rather than waiting on it forever, and on the report at
// the lease's end, and says so.
func TestRemoteWorkerReportGivesUpAtLeaseEnd(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		s := server.New(c, server.Config{LeaseDuration: serverLease, Backoff: func(int) time.Duration { return 0 }})
		stalled := make(chan struct{}, 1)
		abandoned := make(chan struct{}, 8)
		testDone := make(chan struct{})
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/internal/task-complete" {
				select {
				case stalled <- struct{}{}:
				default:
				}
				// Read the body first: only then does the server notice that the
				// client closed the connection.
				_, _ = io.Copy(io.Discard, r.Body)
				select {
				case <-r.Context().Done(): // the worker ended the request
					abandoned <- struct{}{}
				case <-testDone: // it did not: let the test end
				}
				return
			}
			s.ServeHTTP(w, r)
		}))
		t.Cleanup(func() { hs.Close(); s.Close() })

		ws := drover.NewWorkers()
		drover.Register(ws, "quick", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			return "done", nil
		})
		logs := &logBuffer{}
		cfg := fastWorkerConfig(ws) // LeaseDuration 2s: the report's deadline
		cfg.Logger = logs.logger()
		began := time.Now()
		startRemoteWorker(t, drover.RemoteConfig{URL: hs.URL, WaitSeconds: -1}, cfg)
		t.Cleanup(func() { close(testDone) }) // runs first: before the worker stops and the server closes
		id := enqueue(t, c, "quick", nil, nil).ID

		waitChan(t, stalled, "the completion to reach the server")
		waitChan(t, abandoned, "the worker to end the unanswered completion")
		// Its completion reached the server, unanswered: whether it was applied
		// cannot be told over HTTP, and the log says so (helper-88).
		waitFor(t, "the worker to log that it gave up", func() bool {
			return strings.Contains(logs.String(), "could not tell whether the result was recorded")
		})
		if took := time.Since(began); took < cfg.LeaseDuration {
			t.Errorf("the worker gave up on the report after %s, before its lease (%s) could have expired", took, cfg.LeaseDuration)
		}
		if j := getJob(t, c, id); j.Status != drover.StatusRunning {
			t.Errorf("job after the unanswered completion: %s, want still running (the reaper takes it after its lease)", describe(j))
		}
	})
}

// A claim whose answer is lost (the connection breaks after the server claimed)
// is sent again with its request_id, and the server answers the same task: the
// job runs once, at attempt 1. Before, the task stayed leased to a worker that
// never had it until the lease ran out, and ran again at attempt 2 (here, with
// no reaper, never). With outage, the server then answers that many claims with
// 503, as one restarting does: the worker kept the request_id for 150 ms only,
// took a 503 as final, and claimed afresh. The server's lease is long (10 s):
// at 2 s, the resends' backoff (0.75 s) and the answers under a loaded CI
// machine once came to more than the lease less its margin, and the worker
// rightly gave the replayed task back unrun (it ran at attempt 2).
func TestRemoteWorkerResendsAClaimWhoseAnswerWasLost(t *testing.T) {
	for _, outage := range []int{0, 4} {
		t.Run(fmt.Sprintf("outage=%d", outage), func(t *testing.T) { testLostClaimAnswer(t, outage) })
	}
}

func testLostClaimAnswer(t *testing.T, outage int) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		s := server.New(c, server.Config{LeaseDuration: 10 * time.Second, Backoff: func(int) time.Duration { return 0 }})
		var (
			mu      sync.Mutex
			ids     []string // request_id of each claim, in order
			dropped atomic.Bool
			refused atomic.Int64
		)
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/internal/task-claim" {
				s.ServeHTTP(w, r)
				return
			}
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				RequestID string `json:"request_id"`
			}
			_ = json.Unmarshal(body, &req)
			mu.Lock()
			ids = append(ids, req.RequestID)
			mu.Unlock()
			if dropped.Load() && refused.Add(1) <= int64(outage) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"restarting"}}`))
				return
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, r)
			if rec.Code == http.StatusOK && bytes.Contains(rec.Body.Bytes(), []byte(`"task_id"`)) && dropped.CompareAndSwap(false, true) {
				// The server claimed and started the task; its answer is lost.
				if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
					_ = conn.Close()
				}
				return
			}
			writeRecorded(w, rec)
		}))
		t.Cleanup(func() { hs.Close(); s.Close() })

		ws := drover.NewWorkers()
		var runs atomic.Int64
		drover.Register(ws, "once", func(ctx context.Context, job *drover.Job, args struct{}) (any, error) {
			runs.Add(1)
			return nil, nil
		})
		id := enqueue(t, c, "once", nil, nil).ID
		startRemoteWorker(t, drover.RemoteConfig{URL: hs.URL}, fastWorkerConfig(ws))

		j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Attempt != 1 || j.Executions != 1 || runs.Load() != 1 {
			t.Errorf("job after a lost claim answer: %s, %d handler runs; want succeeded at attempt 1, run once", describe(j), runs.Load())
		}
		mu.Lock()
		defer mu.Unlock()
		if !dropped.Load() {
			t.Fatal("no claim answer was dropped")
		}
		for i := 0; i+1 < len(ids); i++ {
			if ids[i] != "" && ids[i] == ids[i+1] {
				return // the claim after the lost answer repeated its request_id
			}
		}
		t.Errorf("claims' request_ids %q: want the lost one sent again", ids)
	})
}

// Against a server older than claims with a request_id (it refuses the field as
// unknown), the worker claims without one.
func TestRemoteWorkerClaimsWithoutRequestIDFromAnOlderServer(t *testing.T) {
	c := newClient(t, "sqlite", nil)
	s := server.New(c, server.Config{LeaseDuration: serverLease, Backoff: func(int) time.Duration { return 0 }})
	var refused atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.URL.Path == "/internal/task-claim" && bytes.Contains(body, []byte(`"request_id"`)) {
			refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"code":"invalid_argument","message":"unknown field \"request_id\""}}`))
			return
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { hs.Close(); s.Close() })
	ws := drover.NewWorkers()
	drover.Register(ws, "once", func(ctx context.Context, job *drover.Job, args struct{}) (any, error) { return nil, nil })
	id := enqueue(t, c, "once", nil, nil).ID
	startRemoteWorker(t, drover.RemoteConfig{URL: hs.URL}, fastWorkerConfig(ws))
	if j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed); j.Status != drover.StatusSucceeded {
		t.Errorf("job through an older server: %s, want succeeded", describe(j))
	}
	if n := refused.Load(); n != 1 {
		t.Errorf("the older server refused %d claims with a request_id, want 1 (then none are sent)", n)
	}
}

// A refusal of a claim's request_id was one old server's: behind a load
// balancer in a rolling upgrade, the next claims reach upgraded ones. The
// worker claims without a request_id for a while, then sends one again; it
// used to stop for good, so each claim whose answer was lost afterwards cost
// a lease and an execution.
func TestRemoteWorkerSendsClaimRequestIDsAgainAfterAnOlderServer(t *testing.T) {
	drover.SetClaimWithoutIDFor(t, 200*time.Millisecond)
	c := newClient(t, "sqlite", nil)
	s := server.New(c, server.Config{LeaseDuration: serverLease, Backoff: func(int) time.Duration { return 0 }})
	var upgraded atomic.Bool
	refused, withID := make(chan struct{}, 1), make(chan struct{}, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.URL.Path == "/internal/task-claim" && bytes.Contains(body, []byte(`"request_id"`)) {
			if !upgraded.Load() {
				select {
				case refused <- struct{}{}:
				default:
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":{"code":"invalid_argument","message":"unknown field \"request_id\""}}`))
				return
			}
			select {
			case withID <- struct{}{}:
			default:
			}
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { hs.Close(); s.Close() })
	ws := drover.NewWorkers()
	drover.Register(ws, "once", func(ctx context.Context, job *drover.Job, args struct{}) (any, error) { return nil, nil })
	startRemoteWorker(t, drover.RemoteConfig{URL: hs.URL, WaitSeconds: 1}, fastWorkerConfig(ws))
	select {
	case <-refused:
	case <-time.After(10 * time.Second):
		t.Fatal("no claim with a request_id reached the older server")
	}
	upgraded.Store(true)
	select {
	case <-withID:
	case <-time.After(10 * time.Second):
		t.Fatal("10s after the older server refused a claim's request_id (claims go without one for 200ms), no claim carried one again")
	}
	// And the claims work: a job enqueued now runs.
	id := enqueue(t, c, "once", nil, nil).ID
	if j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed); j.Status != drover.StatusSucceeded {
		t.Errorf("job after the upgrade: %s, want succeeded", describe(j))
	}
}

// slowResult takes d to encode, as a large result can.
type slowResult struct{ d time.Duration }

func (r slowResult) MarshalJSON() ([]byte, error) {
	time.Sleep(r.d) // the encoding's own work, not a wait for another goroutine
	return []byte(`"encoded"`), nil
}

// A result that takes longer than a lease to encode is still reported, and
// the fence decides (no reaper runs here: the lease is the job's still). The
// report's deadline was set before the encoding: it had passed by the first
// sending, the worker gave up on the result at once ("could not record the
// result"), and the job sat running under nobody until the reaper ran it
// again.
func TestRemoteWorkerReportsAResultSlowToEncode(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{})
		ws := drover.NewWorkers()
		var runs atomic.Int32
		drover.Register(ws, "render", func(context.Context, *drover.Job, struct{}) (any, error) {
			runs.Add(1)
			return slowResult{serverLease + serverLease/4}, nil
		})
		logs := &logBuffer{}
		cfg := fastWorkerConfig(ws) // lease 2s
		cfg.Logger = logs.logger()
		startRemoteWorker(t, drover.RemoteConfig{URL: ts.url, WaitSeconds: 1}, cfg)
		id := enqueue(t, ts.c, "render", nil, nil).ID
		j := waitJob(t, ts.c, id, "finished or given up on", func(j *drover.Job) bool {
			return j.Status == drover.StatusSucceeded || j.Status == drover.StatusFailed || strings.Contains(logs.String(), "could not record")
		})
		if j.Status != drover.StatusSucceeded || string(j.Result) != `"encoded"` || runs.Load() != 1 {
			t.Errorf("%s after %d runs; want succeeded with its result after one run\n%s", describe(j), runs.Load(), logs.String())
		}
	})
}
