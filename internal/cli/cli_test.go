package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
)

// run executes the drover command in-process and returns its exit code and output.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestEnqueueBadInput(t *testing.T) {
	t.Parallel()
	big := filepath.Join(t.TempDir(), "big.json")
	payload := `{"blob":"` + strings.Repeat("x", 10<<20) + `"}`
	if err := os.WriteFile(big, []byte(payload), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			db := testdb.URL(t, kind)
			if code, _, stderr := run(t, "--database-url", db, "migrate", "up"); code != 0 {
				t.Fatalf("migrate up: exit %d: %s", code, stderr)
			}
			cases := []struct {
				name  string
				args  []string
				field string
			}{
				{"empty kind", []string{""}, "kind"},
				{"malformed kind", []string{"bad kind!"}, "kind"},
				{"args array", []string{"echo", "--args", "[1,2]"}, "args"},
				{"args string", []string{"echo", "--args", `"x"`}, "args"},
				{"args invalid JSON", []string{"echo", "--args", "{nope"}, "args"},
				{"args cut short", []string{"echo", "--args", `{"a":1`}, "args"},
				{"args null", []string{"echo", "--args", "null"}, "args"},
				{"args NUL", []string{"echo", "--args", `{"a":"\u0000"}`}, "args"},
				{"args empty", []string{"echo", "--args", ""}, "args"},
				{"args with a key twice", []string{"echo", "--args", `{"a":{"b":1,"b":2}}`}, "args"},
				{"metadata empty", []string{"echo", "--metadata", " "}, "metadata"},
				{"negative priority", []string{"echo", "--priority", "-1"}, "priority"},
				{"negative attempts", []string{"echo", "--max-attempts", "-3"}, "max_attempts"},
				{"zero attempts", []string{"echo", "--max-attempts", "0"}, "max_attempts"},
				{"empty queue", []string{"echo", "--queue", ""}, "queue"},
				{"bad queue", []string{"echo", "--queue", "a/b"}, "queue"},
				{"zero timeout", []string{"echo", "--timeout", "0s"}, "timeout"},
				{"negative timeout", []string{"echo", "--timeout", "-5s"}, "timeout"},
				{"timeout of a part millisecond", []string{"echo", "--timeout", "1500us"}, "timeout"},
				{"run-at the zero time", []string{"echo", "--run-at", "0001-01-01T00:00:00Z"}, "run_at"},
				{"bad run-at", []string{"echo", "--run-at", "tomorrow"}, "run_at"},
				// --run-at "$WHEN" with WHEN unset: not a job that runs now.
				{"empty run-at", []string{"echo", "--run-at", ""}, "run_at"},
				{"metadata array", []string{"echo", "--metadata", "[]"}, "metadata"},
				{"10 MB payload", []string{"echo", "--args", payload}, "args"},
			}
			for _, c := range cases {
				args := append([]string{"--database-url", db, "jobs", "enqueue"}, c.args...)
				code, stdout, stderr := run(t, args...)
				if code != 2 {
					t.Errorf("%s: exit %d, want 2 (stdout %q, stderr %q)", c.name, code, truncate(stdout, 200), truncate(stderr, 200))
				}
				if !strings.Contains(stderr, "invalid "+c.field) {
					t.Errorf("%s: stderr %q does not name field %q", c.name, truncate(stderr, 300), c.field)
				}
			}
			code, stdout, stderr := run(t, "--database-url", db, "-o", "json", "jobs", "list")
			if code != 0 {
				t.Fatalf("jobs list: exit %d: %s", code, stderr)
			}
			var jobs []map[string]any
			if err := json.Unmarshal([]byte(stdout), &jobs); err != nil {
				t.Fatalf("jobs list -o json: %v: %q", err, stdout)
			}
			if len(jobs) != 0 {
				t.Fatalf("bad input wrote %d jobs, want 0", len(jobs))
			}
		})
	}
}

func TestUnparsableDatabaseURL(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-such-dir", "d.db")
	for _, url := range []string{"postgres://user:pa ss@[::1", "mysql://localhost/db", "", missing, "sqlite://" + missing} {
		code, _, stderr := run(t, "--database-url", url, "jobs", "list")
		if code != 2 || !strings.Contains(stderr, "database_url") {
			t.Errorf("url %q: exit %d, stderr %q; want exit 2 naming database_url", url, code, stderr)
		}
		if strings.HasSuffix(url, missing) && !strings.Contains(stderr, "no-such-dir\" does not exist") {
			t.Errorf("url %q: stderr %q; want the missing directory named", url, stderr)
		}
		if strings.Contains(stderr, "pa ss") {
			t.Errorf("url %q: stderr echoes the password: %q", url, stderr)
		}
	}
}

func TestJobsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			db := testdb.URL(t, kind)
			if code, _, stderr := run(t, "--database-url", db, "migrate", "up"); code != 0 {
				t.Fatalf("migrate up: exit %d: %s", code, stderr)
			}
			code, stdout, stderr := run(t, "--database-url", db, "-o", "json", "jobs", "enqueue", "echo",
				"--args", `{"hello":"world"}`, "--queue", "q1", "--priority", "2", "--max-attempts", "4",
				"--timeout", "90s", "--idempotency-key", "k1", "--run-at", "2030-01-02T03:04:05Z")
			if code != 0 {
				t.Fatalf("enqueue: exit %d: %s", code, stderr)
			}
			var job map[string]any
			if err := json.Unmarshal([]byte(stdout), &job); err != nil {
				t.Fatalf("enqueue -o json: %v: %q", err, stdout)
			}
			for _, f := range []string{"id", "kind", "queue", "status", "attempt", "max_attempts", "priority", "run_at",
				"args", "result", "error", "errors", "created_at", "started_at", "finished_at", "rev"} {
				if _, ok := job[f]; !ok {
					t.Errorf("job object lacks field %q: %s", f, stdout)
				}
			}
			want := map[string]any{"kind": "echo", "queue": "q1", "status": "queued", "priority": 2.0,
				"max_attempts": 4.0, "timeout_seconds": 90.0, "run_at": "2030-01-02T03:04:05Z", "attempt": 0.0, "rev": 1.0}
			for k, v := range want {
				if job[k] != v {
					t.Errorf("job[%q] = %v, want %v", k, job[k], v)
				}
			}
			// The same idempotency key returns the same job.
			code, stdout2, _ := run(t, "--database-url", db, "-o", "json", "jobs", "enqueue", "echo", "--idempotency-key", "k1")
			var again map[string]any
			_ = json.Unmarshal([]byte(stdout2), &again)
			if code != 0 || again["id"] != job["id"] {
				t.Fatalf("re-enqueue with the same key: exit %d, id %v, want %v", code, again["id"], job["id"])
			}
			id := jsonID(job)
			if code, _, stderr := run(t, "--database-url", db, "jobs", "cancel", id); code != 0 {
				t.Fatalf("cancel: exit %d: %s", code, stderr)
			}
			code, stdout, _ = run(t, "--database-url", db, "jobs", "show", id)
			if code != 0 || !strings.Contains(stdout, "canceled") || !strings.Contains(stdout, "queued → canceled") {
				t.Fatalf("show after cancel: exit %d:\n%s", code, stdout)
			}
			// -o json shows the same: the job's fields and its event log.
			code, stdout, _ = run(t, "--database-url", db, "-o", "json", "jobs", "show", id)
			var shown struct {
				ID     json.Number `json:"id"`
				Status string      `json:"status"`
				Kind   string      `json:"kind"`
				Events []struct {
					Type string `json:"type"`
					From string `json:"from"`
					To   string `json:"to"`
				} `json:"events"`
			}
			if err := json.Unmarshal([]byte(stdout), &shown); code != 0 || err != nil {
				t.Fatalf("show -o json: exit %d, %v:\n%s", code, err, stdout)
			}
			if shown.ID.String() != id || shown.Status != "canceled" || shown.Kind != "echo" || len(shown.Events) != 2 ||
				shown.Events[1].Type != "canceled" || shown.Events[1].From != "queued" {
				t.Errorf("show -o json = %+v, want the canceled echo job with its enqueued and canceled events:\n%s", shown, stdout)
			}
			if code, _, stderr := run(t, "--database-url", db, "jobs", "cancel", id); code != 1 || !strings.Contains(stderr, "invalid transition") {
				t.Fatalf("second cancel: exit %d, stderr %q; want exit 1 with invalid transition", code, stderr)
			}
			if code, _, stderr := run(t, "--database-url", db, "jobs", "show", "999999"); code != 1 || !strings.Contains(stderr, "not found") {
				t.Fatalf("show unknown: exit %d, stderr %q", code, stderr)
			}
			if code, _, stderr := run(t, "--database-url", db, "jobs", "show", "abc"); code != 2 || !strings.Contains(stderr, "invalid id") {
				t.Fatalf("show abc: exit %d, stderr %q", code, stderr)
			}
			code, stdout, _ = run(t, "--database-url", db, "-o", "json", "dlq", "list")
			if code != 0 || strings.TrimSpace(stdout) != "[]" {
				t.Fatalf("dlq list: exit %d: %q", code, stdout)
			}
			if code, _, _ := run(t, "--database-url", db, "dlq", "requeue", id); code != 1 {
				t.Fatalf("dlq requeue of a canceled job: exit %d, want 1", code)
			}
		})
	}
}

func jsonID(job map[string]any) string {
	b, _ := json.Marshal(job["id"])
	return string(b)
}

func TestBench(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := run(t, "--database-url", testdb.URL(t, kind), "-o", "json", "bench", "--jobs", "300", "--concurrency", "8")
			if code != 0 {
				t.Fatalf("bench: exit %d: %s", code, stderr)
			}
			var res map[string]any
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("bench -o json: %v: %q", err, stdout)
			}
			for _, f := range []string{"jobs", "seconds", "jobs_per_second", "latency_p50_ms", "latency_p99_ms"} {
				if v, ok := res[f].(float64); !ok || v <= 0 {
					t.Errorf("bench %s = %v, want a positive number", f, res[f])
				}
			}
			if res["jobs"] != 300.0 {
				t.Errorf("bench jobs = %v, want 300", res["jobs"])
			}
			// The defaults, as the worker takes them: claims of the
			// concurrency (at most 100), completions of 100.
			if res["claim_batch"] != 8.0 || res["completion_batch"] != 100.0 {
				t.Errorf("bench claim_batch, completion_batch = %v, %v; want 8, 100", res["claim_batch"], res["completion_batch"])
			}
		})
	}
}

// The harness's knobs reach the worker: a claim batch above the concurrency is
// bounded by it, as WorkerConfig.ClaimBatch is by the free slots.
func TestBenchBatches(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := run(t, "--database-url", filepath.Join(t.TempDir(), "b.db"), "-o", "json", "bench",
		"--jobs", "200", "--concurrency", "20", "--claim-batch", "50", "--completion-batch", "7")
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, stderr)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("bench -o json: %v: %q", err, stdout)
	}
	if res["jobs"] != 200.0 || res["claim_batch"] != 20.0 || res["completion_batch"] != 7.0 {
		t.Errorf("bench jobs, claim_batch, completion_batch = %v, %v, %v; want 200, 20, 7", res["jobs"], res["claim_batch"], res["completion_batch"])
	}
}

// Bad input of every kind exits 2 with a message that names it, never a panic,
// and a group command refuses an unknown subcommand instead of printing its help
// and exiting 0.
func TestBadInputExitsTwo(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "d.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"jobs", "enqueue", "echo", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"jobs", "enqueue", "echo", "--priority", "abc"}, `invalid priority: "abc" is not a whole number`},
		{[]string{"frob"}, `unknown command "frob" for "drover" (see drover --help)`},
		{[]string{"job"}, "unknown command \"job\" for \"drover\" (see drover --help)\nDid you mean this?"},
		{[]string{"jobs", "frob"}, `unknown command "frob" for "drover jobs"`},
		{[]string{"dlq", "frob"}, `unknown command "frob" for "drover dlq"`},
		{[]string{"migrate", "sideways"}, `unknown command "sideways" for "drover migrate"`},
		{[]string{"--log-level", "verbose", "jobs", "list"}, "--log-level must be debug, info, warn or error"},
		{[]string{"worker", "--poll-interval", "-1s"}, "invalid poll-interval: -1s, must be positive"},
		{[]string{"worker", "--leader-ttl", "-1s"}, "invalid leader-ttl: -1s, must be positive"},
		{[]string{"server", "--leader-ttl", "50ms"}, "invalid leader-ttl: 50ms is below 100ms"},
		{[]string{"dev", "--leader-ttl", "1ns"}, "invalid leader-ttl: 1ns is below 100ms"},
		{[]string{"dev", "--lease", "-5s"}, "invalid lease: -5s, must be positive"},
		{[]string{"server", "--lease", "-5s"}, "invalid lease: -5s, must be positive"},
		// The server runs no worker: the worker's flags would only be ignored.
		{[]string{"server", "--queues", "payments"}, "unknown flag: --queues"},
		{[]string{"server", "--concurrency", "5"}, "unknown flag: --concurrency"},
		{[]string{"server", "--addr", "127.0.0.1:99999"}, `invalid addr: "127.0.0.1:99999": port "99999" is not a port`},
		{[]string{"server", "--addr", "localhost"}, `invalid addr: "localhost" is not HOST:PORT`},
		{[]string{"dev", "--addr", "127.0.0.1:-1"}, `invalid addr`},
		{[]string{"server", "--tls-cert", "no.pem", "--tls-key", "no.key"}, "invalid tls: --tls-cert no.pem"},
		{[]string{"jobs", "list", "--limit", "5000"}, "invalid limit: 5000, must be 1 to 1000"},
		{[]string{"jobs", "list", "--after", "-5"}, "invalid after: -5"},
		{[]string{"dlq", "list", "--limit", "0"}, "invalid limit: 0, must be 1 to 1000"},
		{[]string{"dlq", "list", "--after", "-3"}, "invalid after: -3"},
		{[]string{"jobs", "list", "--queue", "a b"}, "invalid queue"},
		{[]string{"jobs", "list", "--kind", "a b"}, "invalid kind"},
		{[]string{"dlq", "list", "--queue", "a b"}, "invalid queue"},
		{[]string{"dlq", "purge", "--queue", "a b"}, "invalid queue"},
		{[]string{"dlq", "purge", "--queue", ""}, "invalid queue: must not be empty"},
		{[]string{"bench", "--claim-batch", "-1"}, "invalid claim-batch: -1 is negative"},
		{[]string{"worker", "--queues", "a,,b"}, `invalid queues: "a,,b" has an empty name`},
		{[]string{"worker", "--queues", "a,b,a"}, `invalid queues: "a" is given twice`},
		{[]string{"worker", "--concurrency", "1000001"}, "invalid concurrency: 1000001, must be 1 to 1000000"},
		{[]string{"bench", "--concurrency", "1000001"}, "invalid concurrency: 1000001, must be 1 to 1000000"},
		{[]string{"jobs", "enqueue", "a", "b"}, `drover jobs enqueue takes KIND only, got 2 arguments ["a" "b"]`},
		{[]string{"jobs", "enqueue"}, "drover jobs enqueue needs KIND"},
		{[]string{"chaos", "--jobs", "-1"}, "invalid jobs: -1 is negative"},
		{[]string{"migrate", "status", "--server", "http://127.0.0.1:1"}, "invalid server: drover migrate status works on a database"},
		{[]string{"--server", "http://127.0.0.1:1", "migrate", "up"}, "invalid server: drover migrate up works on a database"},
		{[]string{"--server", "http://127.0.0.1:1", "dev"}, "invalid server: drover dev works on a database"},
		{[]string{"bench", "--server", "http://127.0.0.1:1"}, "invalid server: drover bench works on a database"},
		{[]string{"jobs", "list", "--server", "http://127.0.0.1:1"}, "invalid server: http://127.0.0.1:1 and --database-url are both given: drover jobs list works through one of them"},
		{[]string{"worker", "--server", "http://127.0.0.1:1"}, "invalid server: http://127.0.0.1:1 and --database-url are both given: drover worker works through one of them"},
		{[]string{"jobs", "enqueue", "echo", "--args", "notjson"}, "invalid args: is not valid JSON"},
		{[]string{"bench", "--completion-batch", "10001"}, "invalid completion-batch: 10001, must be 0 (the default) to 10000"},
	} {
		code, _, stderr := run(t, append([]string{"--database-url", db}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "panic") {
			t.Errorf("drover %s: exit %d, stderr %q; want exit 2 with %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
	if code, stdout, _ := run(t, "--database-url", db, "jobs"); code != 0 || !strings.Contains(stdout, "Available Commands") {
		t.Errorf("drover jobs alone: exit %d, want its help and 0:\n%s", code, stdout)
	}
}

// drover dev's hints name the database URL without its password.
func TestHintURLHidesThePassword(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:s3cret@h:5432/db?sslmode=disable":     "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgres://u@h/db?password=s3cret&sslmode=require": "postgres://u@h/db?password=xxxxx&sslmode=require",
		"postgres://u@h/db": "postgres://u@h/db",
		"./drover.db":       "./drover.db",
	} {
		if got := hintURL(in); got != want {
			t.Errorf("hintURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A table that fills its page says, on stderr, how to see the next one (there
// may be none: a page of exactly the jobs left is full too); one that does not
// fill it, and -o json, say nothing more.
func TestListSaysWhenThereIsMore(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "d.db")
	for range 3 {
		if code, _, stderr := run(t, "--database-url", db, "jobs", "enqueue", "echo"); code != 0 {
			t.Fatalf("enqueue: exit %d: %s", code, stderr)
		}
	}
	if _, _, stderr := run(t, "--database-url", db, "jobs", "list", "--limit", "2"); !strings.Contains(stderr, "--after 2") {
		t.Errorf("jobs list --limit 2 of 3 jobs: stderr %q, want the next page's --after 2", stderr)
	}
	for _, args := range [][]string{{"jobs", "list", "--limit", "4"}, {"-o", "json", "jobs", "list", "--limit", "2"}} {
		if _, _, stderr := run(t, append([]string{"--database-url", db}, args...)...); strings.Contains(stderr, "--after") {
			t.Errorf("drover %s: stderr %q, want no hint", strings.Join(args, " "), stderr)
		}
	}
}

// An enqueue that finds its idempotency key answers the earlier job, and says
// so on stderr with -o json, where stdout is the job alone; jobs show prints
// the job's metadata.
func TestEnqueueRepeatIsToldInJSON(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "d.db")
	enq := []string{"--database-url", db, "-o", "json", "jobs", "enqueue", "echo", "--idempotency-key", "k", "--metadata", `{"team":"x"}`}
	code, first, stderr := run(t, enq...)
	if code != 0 || strings.Contains(stderr, "nothing enqueued") {
		t.Fatalf("first enqueue: exit %d, stderr %q", code, stderr)
	}
	code, again, stderr := run(t, enq...)
	if code != 0 || again != first || !strings.Contains(stderr, `exists already with idempotency key "k"; nothing enqueued`) {
		t.Errorf("repeat: exit %d, stdout %q (first %q), stderr %q; want the same job and a note on stderr", code, again, first, stderr)
	}
	var j struct{ ID int64 }
	if err := json.Unmarshal([]byte(first), &j); err != nil {
		t.Fatal(err)
	}
	if _, out, _ := run(t, "--database-url", db, "jobs", "show", fmt.Sprint(j.ID)); !strings.Contains(out, `metadata:        {"team":"x"}`) {
		t.Errorf("jobs show lacks the metadata:\n%s", out)
	}
}
