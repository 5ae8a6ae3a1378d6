package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLatencyRun runs the latency workload on a real PostgreSQL, as the
// README's command does: without --latency-csv (a nil file in the workload's
// writer failed every such run, e2976bd to e6140e9), and with it.
func TestLatencyRun(t *testing.T) {
	dbURL := harnessDatabase(t)
	csv := filepath.Join(t.TempDir(), "latency.csv")
	for _, extra := range [][]string{nil, {"--latency-csv", csv}} {
		t.Run(strings.Join(append([]string{"flags"}, extra...), " "), func(t *testing.T) {
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
