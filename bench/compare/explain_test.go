package main

import (
	"context"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/testdb"
)

// A notice as auto_explain sends it (log_format text, log_analyze and
// log_buffers on): its head, the query text, then the plan from its top node.
func planNotice(ms, query, top, rest string) string {
	return "duration: " + ms + " ms  plan:\nQuery Text: " + query + "\n" + top + "\n" + rest
}

const (
	claimQuery = "-- JobClaim for one queue.\nWITH cand AS (\n    SELECT id FROM q\n)\nUPDATE q SET s = 1 FROM cand RETURNING *"
	claimTop   = "CTE Scan on j  (cost=147.08..147.10 rows=1 width=8) (actual time=1.522..8.378 rows=500 loops=1)"
	claimRest  = "  Buffers: shared hit=2801\n  CTE j\n    ->  Update on q  (cost=0.42..48.40 rows=1 width=82) (actual time=0.024..1.014 rows=500 loops=1)"
)

func TestExplainLogFilesPlansByStatement(t *testing.T) {
	l := newExplainLog()
	l.add("drover", planNotice("9.000", claimQuery, claimTop, claimRest))
	l.add("drover", planNotice("3.000", claimQuery, claimTop, claimRest))
	l.add("drover", planNotice("1.000", claimQuery, claimTop, claimRest))
	l.add("drover", planNotice("0.010", "SELECT 1", "Result  (cost=0.00..0.01 rows=1 width=4) (actual time=0.001..0.001 rows=1 loops=1)", ""))
	l.add("raw", planNotice("2.000", claimQuery, claimTop, claimRest)) // the same text, another system
	// An UPDATE that returns nothing: its rows are those its child fed it, not
	// those of an InitPlan's.
	l.add("raw", planNotice("1.000", "UPDATE raw_jobs SET state = 2 WHERE id = ANY($1)",
		"Update on raw_jobs  (cost=0.42..40.00 rows=0 width=0) (actual time=0.900..0.900 rows=0 loops=1)",
		"  InitPlan 1 (returns $0)\n    ->  Function Scan on unnest  (cost=0.00..0.01 rows=1 width=4) (actual time=0.001..0.001 rows=1 loops=1)\n"+
			"  ->  Index Scan using raw_jobs_pkey on raw_jobs  (cost=0.42..40.00 rows=500 width=10) (actual time=0.010..0.500 rows=500 loops=1)"))
	l.add("drover", "relation \"x\" already exists, skipping") // not a plan

	if len(l.stmts) != 4 {
		t.Fatalf("%d statements filed, want 4 (drover's two, raw's two): %v", len(l.stmts), l.stmts)
	}
	if u := l.stmts[explainKey{"raw", "UPDATE raw_jobs SET state = 2 WHERE id = ANY($1)"}]; u == nil || u.rows != 500 {
		t.Errorf("raw's update: %+v; want 500 rows, from its index scan", u)
	}
	claim := l.stmts[explainKey{"drover", claimQuery}]
	if claim == nil || claim.calls != 3 || claim.rows != 1500 || claim.slowest.ms != 9 || len(claim.sample) != 3 {
		t.Fatalf("drover's claim: %+v; want 3 calls, 1500 rows, the slowest 9 ms, 3 samples", claim)
	}
	if !strings.HasPrefix(claim.slowest.plan, claimTop+"\n") {
		t.Errorf("the plan starts %q, want the top node %q: the query text is not the plan", claim.slowest.plan, claimTop)
	}
	if l.garbled != 1 {
		t.Errorf("garbled = %d, want 1", l.garbled)
	}

	var b strings.Builder
	if err := l.write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"# 1 notices were not plans and were left out",
		"######## drover: 2 statements, 13 ms in PostgreSQL's executor",
		"==== drover: 99.9% of its time, 3 calls, 13 ms, 1500 rows, 8.7 µs a row; a call p50 3.000 ms, p99 9.000, max 9.000",
		"  | -- JobClaim for one queue.\n  | WITH cand AS (",
		"-- a call near the median (3.000 ms):\n" + claimTop + "\n" + claimRest + "\n",
		"-- the slowest call (9.000 ms):\n" + claimTop,
		"==== drover: 0.1% of its time, 1 calls, 0 ms, 1 rows; a call p50 0.010 ms",
		"######## raw: 2 statements, 3 ms",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the file lacks %q:\n%s", want, out)
		}
	}
	// drover's statements come first (the order the systems sent plans), and
	// under 1% of a system's time a statement gets no plan printed.
	if i, j := strings.Index(out, "######## drover"), strings.Index(out, "######## raw"); i > j {
		t.Errorf("raw's section before drover's:\n%s", out)
	}
	if strings.Contains(out, "Result  (cost") {
		t.Errorf("the plan of a statement under 1%% of the time was printed:\n%s", out)
	}
}

// TestExplainRun runs the harness with --explain on a real PostgreSQL, in a
// database of its own (the harness refuses the tests' database): the file
// holds the plans of Drover's claim and completion and of raw's, and the
// report judges no target.
func TestExplainRun(t *testing.T) {
	dbURL := harnessDatabase(t)
	file := filepath.Join(t.TempDir(), "plans.txt")
	table, err := captureStdout(t, func() error {
		return run([]string{"--database-url", dbURL, "--workloads", "burn-down", "--system", "drover,raw",
			"--jobs", "3000", "--explain", file})
	})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, table)
	}
	if !strings.Contains(table, "the issue's targets: not judged: this run explained every statement to "+file) {
		t.Errorf("the report does not say its targets are not judged:\n%s", table)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	plans := string(b)
	for _, want := range []string{
		"######## drover:", "  | -- JobClaim for one queue.", "Update on drover_jobs", "Delete on drover_ready",
		"  | -- Many completions in one statement", "Buffers: shared hit=",
		"######## raw:", "Update on raw_jobs",
	} {
		if !strings.Contains(plans, want) {
			t.Errorf("the plans lack %q:\n%s", want, plans)
		}
	}
}

// harnessDatabase gives a test a database of its own on the tests' PostgreSQL
// (the harness refuses the tests' database), dropped when the test ends, and
// returns its URL. It skips the test, or fails it under CI=true, if PostgreSQL
// is down.
func harnessDatabase(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := testdb.Connect(ctx, t)
	u, err := url.Parse(testdb.PostgresBaseURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/drover_compare_test"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS drover_compare_test WITH (FORCE)"); err != nil {
			t.Errorf("drop the harness's database: %v", err)
		}
	})
	return u.String()
}

// captureStdout runs fn with os.Stdout sent to a pipe, and returns what fn
// wrote there and fn's error.
func captureStdout(t *testing.T, fn func() error) (string, error) {
	t.Helper()
	stdout := os.Stdout
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout = w
	out := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	err = fn()
	os.Stdout = stdout
	w.Close()
	return <-out, err
}
