package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// drover bench interrupted while it waits for its jobs (after the enqueue)
// answers an error that is context.Canceled, so that it exits 130, as a
// signal that cuts any other command short does (README). It wrapped
// nothing, and Ctrl-C there exited 1, as for a failure (helper-82).
func TestBenchInterruptedAfterTheEnqueueIsCanceled(t *testing.T) {
	var out, errb bytes.Buffer
	g := &globals{stdout: &out, stderr: &errb, logLevel: "error",
		databaseURL: filepath.Join(t.TempDir(), "bench.db")}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { time.Sleep(1500 * time.Millisecond); cancel() }()
	_, err := g.bench(ctx, benchParams{jobs: 200000, concurrency: 1, batch: 200000, claimBatch: 1, completionBatch: 1})
	if err == nil {
		t.Skip("bench finished before the interrupt")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("bench interrupted: %v; not context.Canceled, so drover bench exits 1, not 130", err)
	}
}

// A SQLite file: URI whose parameters Drover refuses (_txlock=deferred,
// nolock=1, cache=shared, ...), or a plain path with a '?', is bad input in
// --database-url: exit 2 naming database_url, as a bad PostgreSQL URL is. It
// exited 1 without naming it (helper-82).
func TestRefusedSQLiteParamsAreBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, url := range []string{"_txlock=deferred", "nolock=1", "cache=shared", "_busy_timeout=0", ""} {
		if url == "" {
			url = filepath.Join(dir, "d?.db")
		} else {
			url = "file:" + filepath.Join(dir, "d.db") + "?" + url
		}
		code, _, stderr := run(t, "--database-url", url, "jobs", "list")
		if code != 2 || !strings.Contains(stderr, "database_url") {
			t.Errorf("--database-url %q: exit %d, stderr %q; want exit 2 naming database_url", url, code, stderr)
		}
	}
}

// A number flag given a value that is not one, or out of range, names the
// flag, the value and the reason, without Go's strconv text (`strconv.ParseInt:
// parsing "abc": invalid syntax`), as every other bad value does (helper-82).
func TestNumberFlagErrorsNameTheFlag(t *testing.T) {
	db := filepath.Join(t.TempDir(), "d.db")
	for _, c := range []struct{ flag, val, want string }{
		{"--priority", "abc", `invalid priority: "abc" is not a whole number`},
		{"--max-attempts", "99999999999999999999", `invalid max-attempts: "99999999999999999999" is out of range`},
	} {
		code, _, stderr := run(t, "--database-url", db, "jobs", "enqueue", "echo", c.flag, c.val)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "strconv") {
			t.Errorf("jobs enqueue echo %s %s: exit %d, stderr %q; want exit 2 with %q", c.flag, c.val, code, stderr, c.want)
		}
	}
}

// A bearer token that cannot arrive as given is refused at once, exit 2
// naming it: whitespace around it (HTTP trims the header, so a server given
// "secret " refused every client, even one sending "secret "), a control
// character (no HTTP client sends one: the CLI failed with net/http's text,
// exit 1, and a remote worker ran on claiming nothing), or, for a server's
// own tokens, an empty one given on purpose (--admin-token "$TOKEN" with
// TOKEN unset turned auth off without a word) (helper-80, helper-82).
func TestTokensThatCannotArriveAreRefused(t *testing.T) {
	db := filepath.Join(t.TempDir(), "d.db")
	for _, v := range []string{"DROVER_ADMIN_TOKEN", "DROVER_WORKER_TOKEN", "DROVER_TOKEN"} {
		t.Setenv(v, "") // restored after the test
		os.Unsetenv(v)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--addr", "127.0.0.1:0", "--database-url", db, "--admin-token", "secret "}, "invalid admin_token: has whitespace around it"},
		{[]string{"server", "--addr", "127.0.0.1:0", "--database-url", db, "--worker-token", "w\x01"}, "invalid worker_token: has a control character"},
		{[]string{"server", "--addr", "127.0.0.1:0", "--database-url", db, "--admin-token", ""}, "invalid admin_token: is empty"},
		{[]string{"dev", "--addr", "127.0.0.1:0", "--database-url", db, "--worker-token", ""}, "invalid worker_token: is empty"},
		{[]string{"--server", "http://127.0.0.1:1", "--token", "secret\r", "jobs", "list"}, "invalid token: has whitespace around it"},
		{[]string{"worker", "--server", "http://127.0.0.1:1", "--token", "w\n", "--queues", "q"}, "invalid token: has whitespace around it"},
		{[]string{"--server", "http://127.0.0.1:1", "--token", "a\x7fb", "jobs", "list"}, "invalid token: has a control character"},
	} {
		code, _, stderr := run(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("drover %q: exit %d, stderr %q; want exit 2 with %q", c.args, code, stderr, c.want)
		}
	}
}
