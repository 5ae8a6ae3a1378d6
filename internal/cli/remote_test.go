package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/server"
)

// TestRemoteCommands runs the jobs and dlq commands against a real server on
// loopback, with no database URL at all: operators need no database access.
func TestRemoteCommands(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			drv := testdb.Open(t, kind)
			c, err := drover.NewClient(drv, nil)
			if err != nil {
				t.Fatal(err)
			}
			srv := server.New(c, server.Config{AdminToken: "admin-secret", WorkerToken: "worker-secret"})
			t.Cleanup(srv.Close)
			hs := httptest.NewServer(srv)
			t.Cleanup(hs.Close)
			// No --database-url: beside --server it is refused (TestBadInputExitsTwo).
			remote := []string{"--server", hs.URL, "--token", "admin-secret"}
			cli := func(args ...string) (int, string, string) { return run(t, append(remote, args...)...) }

			code, stdout, stderr := cli("-o", "json", "jobs", "enqueue", "echo", "--args", `{"a":1}`, "--idempotency-key", "k", "--priority", "3")
			if code != 0 {
				t.Fatalf("remote enqueue: exit %d: %s", code, stderr)
			}
			var job map[string]any
			if err := json.Unmarshal([]byte(stdout), &job); err != nil || job["priority"] != 3.0 || job["status"] != "queued" {
				t.Fatalf("remote enqueue answered %q (%v)", stdout, err)
			}
			id := jsonID(job)
			if code, stdout, _ := cli("jobs", "enqueue", "echo", "--idempotency-key", "k"); code != 0 || !strings.Contains(stdout, "exists already") {
				t.Fatalf("remote re-enqueue: exit %d: %q", code, stdout)
			}
			// Bad input gets the answer it gets without --server: exit 2 naming the field.
			for _, bad := range [][]string{
				{"jobs", "enqueue", "echo", "--args", "[1]"}, {"jobs", "enqueue", "echo", "--args", `{"a":1`},
				{"jobs", "enqueue", "echo", "--args", "null"}, {"jobs", "enqueue", "echo", "--metadata", "{x"},
				{"jobs", "list", "--queue", "a b"}, {"dlq", "purge", "--queue", "a b"},
			} {
				field := map[string]string{"--args": "args", "--metadata": "metadata", "--queue": "queue"}[bad[len(bad)-2]]
				if code, _, stderr := cli(bad...); code != 2 || !strings.Contains(stderr, "invalid "+field) {
					t.Fatalf("remote %v: exit %d, stderr %q; want 2 naming %s", bad, code, stderr, field)
				}
			}
			if code, stdout, _ := cli("jobs", "list", "--status", "queued"); code != 0 || !strings.Contains(stdout, "echo") {
				t.Fatalf("remote list: exit %d: %q", code, stdout)
			}
			if code, stdout, _ := cli("jobs", "show", id); code != 0 || !strings.Contains(stdout, "enqueued") {
				t.Fatalf("remote show: exit %d: %q", code, stdout)
			}
			if code, _, stderr := cli("jobs", "show", "424242"); code != 1 || !strings.Contains(stderr, "not found") {
				t.Fatalf("remote show unknown: exit %d, stderr %q", code, stderr)
			}
			if code, _, stderr := cli("jobs", "cancel", id); code != 0 {
				t.Fatalf("remote cancel: exit %d: %s", code, stderr)
			}
			if code, _, stderr := cli("jobs", "cancel", id); code != 1 || !strings.Contains(stderr, "invalid transition") {
				t.Fatalf("remote second cancel: exit %d, stderr %q", code, stderr)
			}

			// A failed job: DLQ list, requeue, purge through the server.
			res, err := c.Enqueue(context.Background(), "fail", nil, &drover.EnqueueOpts{MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			failJob(t, drv, res.Job.ID)
			code, stdout, _ = cli("-o", "json", "dlq", "list")
			var dlq []map[string]any
			if err := json.Unmarshal([]byte(stdout), &dlq); code != 0 || err != nil || len(dlq) != 1 {
				t.Fatalf("remote dlq list: exit %d: %q", code, stdout)
			}
			if code, stdout, _ := cli("dlq", "requeue", jsonID(dlq[0])); code != 0 || !strings.Contains(stdout, "requeued failed job") {
				t.Fatalf("remote dlq requeue: exit %d: %q", code, stdout)
			}
			if code, stdout, _ := cli("dlq", "requeue", jsonID(dlq[0])); code != 0 || !strings.Contains(stdout, "was requeued before") {
				t.Fatalf("remote dlq requeue, repeated: exit %d: %q, want it to say the job was requeued before", code, stdout)
			}
			if code, stdout, _ := cli("dlq", "purge"); code != 0 || !strings.Contains(stdout, "purged 1") {
				t.Fatalf("remote dlq purge: exit %d: %q", code, stdout)
			}

			// Without the admin token the server refuses.
			code, _, stderr = run(t, "--server", hs.URL, "--token", "worker-secret", "jobs", "list")
			if code != 1 || !strings.Contains(stderr, "worker token") {
				t.Fatalf("remote list with the worker token: exit %d, stderr %q; want refused", code, stderr)
			}
			if code, _, stderr := run(t, "--server", "ftp://x", "jobs", "list"); code != 2 || !strings.Contains(stderr, "invalid server") {
				t.Fatalf("bad --server: exit %d, stderr %q", code, stderr)
			}
		})
	}
}

// failJob claims, starts and fails a job permanently through the driver.
func failJob(t *testing.T, drv driver.Driver, id int64) {
	t.Helper()
	ctx := context.Background()
	jobs, err := drv.JobClaim(ctx, driver.ClaimParams{ID: id, Owner: "t", LeaseDuration: 30e9})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim %d: %v %d", id, err, len(jobs))
	}
	f := driver.FenceParams{ID: id, Attempt: jobs[0].Attempt, LeaseToken: jobs[0].LeaseToken}
	if _, err := drv.JobStart(ctx, f); err != nil {
		t.Fatal(err)
	}
	if _, err := drv.JobFail(ctx, driver.FailParams{FenceParams: f, Error: "boom", Permanent: true}); err != nil {
		t.Fatal(err)
	}
}

// TestRemoteAnswerOverTheLimit: an answer larger than the command reads says
// so and how to ask for less, where it failed as "unexpected end of JSON
// input" (a list of jobs with a megabyte of args each).
func TestRemoteAnswerOverTheLimit(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jobs":[`)
		pad := strings.Repeat(" ", 1<<20)
		for range maxAnswerBytes>>20 + 1 {
			_, _ = io.WriteString(w, pad)
		}
		_, _ = io.WriteString(w, `]}`)
	}))
	t.Cleanup(hs.Close)
	code, _, stderr := run(t, "--server", hs.URL, "jobs", "list")
	if code != 1 || !strings.Contains(stderr, "over 64 MiB") || !strings.Contains(stderr, "--limit") {
		t.Errorf("jobs list of a 65 MiB answer: exit %d, stderr %q; want 1, saying it is over 64 MiB and to use --limit", code, stderr)
	}
}

// DROVER_SERVER in the environment gives way to --database-url on the command
// line, as a variable gives way to a flag: the command works on the database.
// Not parallel: it sets the environment.
func TestDatabaseURLFlagBeatsServerFromEnv(t *testing.T) {
	t.Setenv("DROVER_SERVER", "http://127.0.0.1:1") // nothing listens there
	db := filepath.Join(t.TempDir(), "d.db")
	if code, _, stderr := run(t, "--database-url", db, "jobs", "enqueue", "echo"); code != 0 {
		t.Fatalf("enqueue with --database-url under DROVER_SERVER: exit %d: %s", code, stderr)
	}
	if code, stdout, stderr := run(t, "--database-url", db, "jobs", "list"); code != 0 || !strings.Contains(stdout, "echo") {
		t.Fatalf("jobs list on the database: exit %d, %q, %s", code, stdout, stderr)
	}
	// Without the flag the variable holds: the command goes to the server.
	if code, _, stderr := run(t, "jobs", "list"); code == 0 || !strings.Contains(stderr, "127.0.0.1:1") {
		t.Fatalf("jobs list under DROVER_SERVER alone: exit %d, %s; want it to try the server", code, stderr)
	}
}
