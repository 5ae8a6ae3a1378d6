package main

import (
	"strings"
	"testing"
)

// closedPortURL is a database no run reaches (nothing listens on port 1): a
// flag test that got as far as PostgreSQL fails on its connection error
// instead of running anything.
const closedPortURL = "postgres://postgres@127.0.0.1:1/drover_compare_flags?sslmode=disable"

// A latency workload of rate × duration under one job offers none; its line
// read met on the p50 and p99 of no job ("met  0.00 / 0.00 ms"). The flags
// are refused by name, and a result without a latency meets no line.
func TestLatencyWithNoJobOffered(t *testing.T) {
	err := run([]string{"--database-url", closedPortURL, "--workloads", "latency", "--system", "drover",
		"--latency-rate", "1", "--latency-duration", "500ms"})
	if want := "--latency-duration 500ms at --latency-rate 1/s offers no job"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("run with 1/s for 500ms = %v, want an error containing %q", err, want)
	}
	// The same flags without the latency workload are not its to refuse.
	err = run([]string{"--database-url", closedPortURL, "--workloads", "burn-down", "--system", "drover",
		"--latency-rate", "1", "--latency-duration", "500ms"})
	if err == nil || strings.Contains(err.Error(), "offers no job") {
		t.Errorf("run of burn-down with 1/s for 500ms = %v, want it past the flags (to the connection error)", err)
	}

	ts := targets([]result{{Workload: "latency", Param: "1/s for 500ms", System: "drover", OfferedPerSec: 1, DBUnfinished: 0}})
	if len(ts) != 2 || ts[0].met || ts[0].figure != "no latency measured" {
		t.Errorf("targets of a latency run with no job = %+v, want its line not met, \"no latency measured\"", ts)
	}
}
