package main

import (
	"slices"
	"strings"
	"testing"
)

// "all" in --workloads or --system chooses every name, and the names beside it
// are still checked: "all" returned at once, so "all,bogus" ran everything and
// said nothing of the unknown name.
func TestPickListChecksNamesBesideAll(t *testing.T) {
	for _, in := range []string{"all,bogus", "bogus,all", "burn-down,all,latncy"} {
		if got, err := pickList(in, allWorkloads, "workload", "--workloads"); err == nil || !strings.Contains(err.Error(), "--workloads: unknown workload") {
			t.Errorf("pickList(%q) = %v, %v; want an unknown workload refused", in, got, err)
		}
	}
	for _, in := range []string{"all", "all,burn-down", "continuous, all"} {
		if got, err := pickList(in, allWorkloads, "workload", "--workloads"); err != nil || !slices.Equal(got, allWorkloads) {
			t.Errorf("pickList(%q) = %v, %v; want every workload", in, got, err)
		}
	}
	err := run([]string{"--database-url", closedPortURL, "--system", "all,rivr"})
	if want := `--system: unknown system "rivr"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("run --system all,rivr = %v, want an error containing %q", err, want)
	}
}
