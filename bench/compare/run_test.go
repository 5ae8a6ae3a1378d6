package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/testdb"
)

// TestLatencyRun runs the latency workload on a real PostgreSQL, as the
// README's command does: without --latency-csv (a nil file in the workload's
// writer failed every such run, e2976bd to e6140e9), and with it.
func TestLatencyRun(t *testing.T) {
	dbURL := harnessDatabase(t)
	csv := filepath.Join(t.TempDir(), "latency.csv")
	for name, extra := range map[string][]string{"without --latency-csv": nil, "with --latency-csv": {"--latency-csv", csv}} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"--database-url", dbURL, "--workloads", "latency", "--system", "drover",
				"--latency-rate", "200", "--latency-duration", "1s", "-o", "json"}, extra...)
			out, err := captureStdout(t, func() error { return run(args) })
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out)
			}
			var rep report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("the report is not JSON: %v\n%s", err, out)
			}
			if len(rep.Results) != 1 {
				t.Fatalf("%d results, want the latency run's one:\n%s", len(rep.Results), out)
			}
			r := rep.Results[0]
			if r.Error != "" || r.StartP50 <= 0 || r.Lost != 0 || r.Dup != 0 {
				t.Fatalf("latency on drover: error %q, start p50 %.2f ms, lost %d, dup %d; want no error, a p50 and 0 / 0",
					r.Error, r.StartP50, r.Lost, r.Dup)
			}
		})
	}
	b, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if rows[0]+"\n" != latencyCSVHeader || len(rows) < 150 {
		t.Fatalf("--latency-csv holds %d lines beginning %q; want its header and a row for each of ~200 jobs", len(rows), rows[0])
	}
}

// A run with a failed workload ends in an error, so the harness exits
// non-zero after printing its report.
func TestReportFailedCountsFailedRuns(t *testing.T) {
	ok := report{Results: []result{{Workload: "latency", System: "drover"}}}
	if err := ok.failed(); err != nil {
		t.Fatalf("failed() = %v for a report with no failed run", err)
	}
	bad := report{Results: []result{{Workload: "latency", System: "drover"}, {Workload: "latency", System: "river", Error: "boom"}}}
	if err := bad.failed(); err == nil || !strings.Contains(err.Error(), "1 of 2 workload runs failed") {
		t.Fatalf("failed() = %v, want an error counting 1 of 2 runs", err)
	}
}

// A database whose sessions default to repeatable read: Drover's driver
// refuses it, and the run ends with that error (a nil *pgdriver.Driver kept in
// the system's driver.Driver made its Close panic, hiding it). The URL the
// error recommends, default_transaction_isolation=read%20committed, then
// runs (the harness wrote the URL back with the space as a '+', which
// PostgreSQL refused).
func TestRunOnADatabaseThatDefaultsToRepeatableRead(t *testing.T) {
	dbURL := harnessDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := testdb.Connect(ctx, t)
	defer admin.Close(ctx)
	for _, q := range []string{"CREATE DATABASE drover_compare_test",
		"ALTER DATABASE drover_compare_test SET default_transaction_isolation = 'repeatable read'"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	args := []string{"--workloads", "burn-down", "--system", "drover", "--jobs", "200", "-o", "json"}
	out, err := captureStdout(t, func() error { return run(append([]string{"--database-url", dbURL}, args...)) })
	if err == nil || !strings.Contains(err.Error(), "Drover's statements need read committed") {
		t.Fatalf("run on a repeatable-read database = %v (stdout %q), want the driver's refusal", err, out)
	}
	fixed := dbURL + "&default_transaction_isolation=read%20committed"
	if !strings.Contains(dbURL, "?") {
		fixed = dbURL + "?default_transaction_isolation=read%20committed"
	}
	out, err = captureStdout(t, func() error { return run(append([]string{"--database-url", fixed}, args...)) })
	if err != nil {
		t.Fatalf("run with %s: %v\n%s", fixed, err, out)
	}
	var rep report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Results) != 1 || rep.Results[0].WorkPerSec <= 0 {
		t.Fatalf("the burn-down's report: %v\n%s", err, out)
	}
}
