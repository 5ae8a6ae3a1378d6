package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
)

// A job's text for people (a worker's error, an idempotency key) is printed
// with its control characters escaped: a newline or tab in an error must not
// break the DLQ table into a row of its own, and an escape sequence a worker
// reported must not reach the operator's terminal, where it could recolour,
// clear or retitle it.
func TestTablesEscapeControlCharacters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "d.db")
	drv, err := drover.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	if err := drv.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := drover.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Enqueue(ctx, "fail", nil, &drover.EnqueueOpts{MaxAttempts: 1, IdempotencyKey: "key\x1b]0;pwned\x07"})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := drv.JobClaim(ctx, driver.ClaimParams{ID: res.Job.ID, Owner: "t", LeaseDuration: 30e9})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %d", err, len(jobs))
	}
	f := driver.FenceParams{ID: res.Job.ID, Attempt: jobs[0].Attempt, LeaseToken: jobs[0].LeaseToken}
	if _, err := drv.JobStart(ctx, f); err != nil {
		t.Fatal(err)
	}
	const reported = "line one\nFAKE  row\tx \x1b[2J\x1b[31mred\u009b0m"
	if _, err := drv.JobFail(ctx, driver.FailParams{FenceParams: f, Error: reported, Permanent: true}); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := run(t, "--database-url", db, "dlq", "list")
	if code != 0 {
		t.Fatalf("dlq list: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) != 2 {
		t.Errorf("dlq list of one job printed %d lines, want the header and one row:\n%s", len(lines), stdout)
	}
	if strings.ContainsAny(stdout, "\x1b\u009b") {
		t.Errorf("dlq list printed a worker's escape sequence raw: %q", stdout)
	}
	if !strings.Contains(stdout, `line one\nFAKE  row\tx \x1b[2J`) {
		t.Errorf("dlq list does not show the error with its control characters escaped: %q", stdout)
	}

	code, stdout, stderr = run(t, "--database-url", db, "jobs", "show", "1")
	if code != 0 {
		t.Fatalf("jobs show: exit %d: %s", code, stderr)
	}
	if strings.ContainsAny(stdout, "\x1b\x07\t\u009b") {
		t.Errorf("jobs show printed control characters raw: %q", stdout)
	}
	for _, want := range []string{`key\x1b]0;pwned\a`, "line one\n", `\x1b[31mred\u009b0m`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("jobs show does not show %q:\n%s", want, stdout)
		}
	}
	// The error's second line is indented under its field, not a field of its own.
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "FAKE") {
			t.Errorf("jobs show printed the error's second line at the margin, like a field: %q", l)
		}
	}

	// -o json is for programs: the text as stored, escaped as JSON only.
	code, stdout, _ = run(t, "--database-url", db, "-o", "json", "dlq", "list")
	if code != 0 || !strings.Contains(stdout, `"line one\nFAKE  row\tx \u001b[2J`) {
		t.Errorf("dlq list -o json: exit %d, %q; want the error as stored", code, stdout)
	}
}

// `jobs show` prints a job's JSON values compact, as the HTTP API answers
// them, so the database and a server show one job alike.
func TestJobsShowPrintsJSONCompact(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "d.db")
	if code, _, stderr := run(t, "--database-url", db, "migrate", "up"); code != 0 {
		t.Fatalf("migrate up: exit %d: %s", code, stderr)
	}
	if code, _, stderr := run(t, "--database-url", db, "jobs", "enqueue", "k", "--args", `{"ok": 1,  "list": [1, 2]}`); code != 0 {
		t.Fatalf("jobs enqueue: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := run(t, "--database-url", db, "jobs", "show", "1")
	if code != 0 {
		t.Fatalf("jobs show: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, `{"ok":1,"list":[1,2]}`) {
		t.Errorf("jobs show does not print the args compact, as the API does:\n%s", stdout)
	}
}
