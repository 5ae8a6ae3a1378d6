package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// A request still blocked at the database when the shutdown's deadline passes
// is canceled, its database call with it, so that the driver can close: once
// shutdown no longer canceled requests at its start, a heartbeat waiting on a
// row lock outlived ListenAndServe, and closing the pool waited for the lock
// (helper-43).
func TestShutdownCancelsARequestPastItsDeadline(t *testing.T) {
	for _, call := range []string{"heartbeat", "claim"} {
		t.Run(call, func(t *testing.T) { shutdownWithABlockedCall(t, call, 500*time.Millisecond) })
	}
}

// A negative ShutdownTimeout does not wait for requests in flight (`drover
// dev --shutdown-timeout 0`); zero, the default, would wait 30 s for this one.
func TestShutdownWithoutWaiting(t *testing.T) {
	shutdownWithABlockedCall(t, "heartbeat", -1)
}

// shutdownWithABlockedCall runs a server, has another session lock the
// job's row (a heartbeat) or the job table (a claim, whose statement outlives
// its request so that a departed worker cannot cut it short), sends that
// call, and shuts the server down while it waits.
func shutdownWithABlockedCall(t *testing.T, call string, timeout time.Duration) {
	url := testdb.URL(t, "postgres")
	d := testdb.OpenURL(t, "postgres", url)
	c, err := drover.NewClient(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(c, Config{})
	t.Cleanup(s.Close)
	if _, err := c.Enqueue(context.Background(), "k", nil, nil); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	addr, served := make(chan net.Addr, 1), make(chan error, 1)
	go func() {
		served <- ListenAndServe(ctx, s, ListenConfig{Addr: "127.0.0.1:0", ShutdownTimeout: timeout,
			Ready: func(a net.Addr) { addr <- a }}, nil)
	}()
	base := fmt.Sprintf("http://%s", <-addr)
	resp, err := http.Post(base+"/internal/task-claim", "application/json", strings.NewReader(`{"worker_id":"w1","queues":["default"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var ans claimAnswer
	err = json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	if err != nil || len(ans.Tasks) != 1 {
		t.Fatalf("claim: %+v, %v", ans, err)
	}
	tk := ans.Tasks[0]

	// Another session holds the job's row: the heartbeat waits for it.
	lock, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(context.Background())
	tx, err := lock.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	lockSQL, path, body := "SELECT 1 FROM drover_jobs WHERE id = $1 FOR UPDATE", "/internal/heartbeat",
		fmt.Sprintf(`{"task_id":%d,"attempt":%d,"lease_token":%q}`, tk.TaskID, tk.Attempt, tk.LeaseToken)
	args := []any{tk.TaskID}
	if call == "claim" {
		lockSQL, path, body, args = "LOCK TABLE drover_jobs IN ACCESS EXCLUSIVE MODE", "/internal/task-claim",
			`{"worker_id":"w2","queues":["default"]}`, nil
	}
	if _, err := tx.Exec(context.Background(), lockSQL, args...); err != nil {
		t.Fatal(err)
	}
	go func() {
		if r, err := http.Post(base+path, "application/json", strings.NewReader(body)); err == nil {
			r.Body.Close()
		}
	}()
	// No signal says the call reached the lock: ask the database until it has.
	for end := time.Now().Add(10 * time.Second); ; {
		var waiting bool
		if err := lock.QueryRow(context.Background(),
			// Blocked by this session: other tests' sessions wait on locks of their own.
			"SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid)))").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the %s never waited on the lock", call)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	select {
	case err := <-served: // past the deadline: an error saying so
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("ListenAndServe = %v, want the shutdown's deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("ListenAndServe still waiting for the %s 10 s after its shutdown began (ShutdownTimeout %s)", call, timeout)
	}
	closed := make(chan struct{})
	go func() { _ = d.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Errorf("closing the driver after ListenAndServe returned: blocked (the %s's query still holds its connection)", call)
	}
	_ = tx.Rollback(context.Background())
	<-closed
}
