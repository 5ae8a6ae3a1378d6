package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesBadFlags: a bad flag stops the run before anything is opened
// or written, with an error that names the flag and what was wrong with it.
func TestRunRefusesBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--jobs", "-5"}, "--jobs must be at least 1, got -5"},
		{[]string{"--concurrency", "0"}, "--concurrency must be at least 1, got 0"},
		{[]string{"--latency-rate", "0"}, "--latency-rate must be at least 1, got 0"},
		{[]string{"--insert-workers", "0"}, "--insert-workers must be at least 1, got 0"},
		{[]string{"--insert-batch", "2000", "--max-pending", "1000"}, "--max-pending must be at least --insert-batch (2000), got 1000"},
		{[]string{"--claim-batch", "-1"}, "--claim-batch must not be negative (0: Drover's default), got -1"},
		{[]string{"--max-conns", "-2"}, "--max-conns must not be negative (0: pgx's default), got -2"},
		{[]string{"--completion-batch", "-3"}, "--completion-batch must not be negative (0: Drover's default), got -3"},
		{[]string{"--continuous", "-1s"}, "--continuous must be positive, got -1s"},
		{[]string{"--burn-down-rounds", "0"}, "--burn-down-rounds must be at least 1, got 0"},
		{[]string{"--backlog", "10,abc"}, `--backlog: "abc" is not a size of at least 2`},
		{[]string{"--backlog", "10, 20,10"}, "--backlog: 10 is given twice (each size is a table of its own)"},
		{[]string{"--backlog-future", "1.5"}, "--backlog-future must be a fraction from 0 to 1, got 1.5"},
		{[]string{"--backlog-future", "NaN"}, "--backlog-future must be a fraction from 0 to 1, got NaN"},
		{[]string{"--concurrency", "1000001"}, "--concurrency must be at most 1000000 (Drover's handler slots bound), got 1000001"},
		{[]string{"--completion-batch", "10001"}, "--completion-batch must be at most 10000 (Drover's bound), got 10001"},
		{[]string{"--river-max-workers", "10001"}, "--river-max-workers must be at most 10000 (River's MaxWorkers bound), got 10001"},
		{[]string{"--workloads", "burn-down,latency,burn-down"}, `--workloads: workload "burn-down" is given twice`},
		{[]string{"--system", "drover,drover"}, `--system: system "drover" is given twice`},
		{[]string{"--workloads", "foo"}, `unknown workload "foo"`},
		{[]string{"--system", "bogus"}, `unknown system "bogus"`},
		{[]string{"-o", "xml"}, `-o must be table or json, got "xml"`},
		{[]string{"--sqlite-only", "--workloads", "latency,backlog"}, "--sqlite-only runs burn-down and continuous only, and --workloads latency,backlog has neither"},
		{[]string{"--sqlite-only", "--system", "river"}, "--sqlite-only runs drover and raw only (and river with --river-sqlite), and --system river has neither"},
		{[]string{"--river-sqlite", "--system", "drover,raw"}, "--river-sqlite runs River on SQLite, and --system drover,raw leaves river out"},
		{[]string{"--sqlite-only", "--explain", "plans.txt"}, "--explain explains PostgreSQL's statements, and --sqlite-only contacts no PostgreSQL"},
		{[]string{"burn-down"}, `unexpected argument "burn-down"`},
		{[]string{"--latency-csv", "lat.csv", "--workloads", "burn-down"}, "--latency-csv is written by the latency workload, and --workloads burn-down leaves it out"},
		{[]string{"--workloads", "latency,backlog", "--system", "raw"}, "--system raw runs burn-down and continuous only, and --workloads latency,backlog has neither"},
		{[]string{"--sqlite-dir", "/nonexistent-drover-compare"}, "--sqlite-dir: stat /nonexistent-drover-compare: no such file or directory"},
		{[]string{"--sqlite-dir", "main.go"}, "--sqlite-dir: main.go is not a directory"},
		{[]string{"--memprofile", "/nonexistent-drover-compare/m.prof"}, "--memprofile: open /nonexistent-drover-compare/m.prof"},
		{[]string{"--cpuprofile", "/nonexistent-drover-compare/c.prof"}, "--cpuprofile: open /nonexistent-drover-compare/c.prof"},
		{[]string{"--table-from", "/nonexistent-drover-compare.json"}, "--table-from: open /nonexistent-drover-compare.json"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			prof := filepath.Join(t.TempDir(), "cpu.prof")
			err := run(append([]string{"--cpuprofile", prof}, c.args...))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", c.args, err, c.want)
			}
			if _, err := os.Stat(prof); !os.IsNotExist(err) {
				t.Fatalf("run(%q) wrote its CPU profile before refusing its flags (stat: %v)", c.args, err)
			}
		})
	}
}
