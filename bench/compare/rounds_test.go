package main

import (
	"slices"
	"strings"
	"testing"
)

// fakeSys is a system that only has a name: the schedule needs no more.
type fakeSys struct {
	system
	n string
}

func (f fakeSys) name() string { return f.n }

func sys(name string) system { return fakeSys{n: name} }

func names(ss []system) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.name()
	}
	return out
}

// Every system runs once in its usual order, then again in the reverse order,
// and so on, so no system always runs first or after the same one; the raw
// baselines run in rounds like the systems they are the baseline of.
func TestBurnDownSchedule(t *testing.T) {
	got := names(burnDownSchedule([]system{sys("drover"), sys("river"), sys("raw"), sys("drover-sqlite")}, 3))
	want := []string{"drover", "river", "raw", "drover-sqlite", "drover-sqlite", "raw", "river", "drover",
		"drover", "river", "raw", "drover-sqlite"}
	if !slices.Equal(got, want) {
		t.Errorf("schedule = %v, want %v", got, want)
	}
	if got := names(burnDownSchedule([]system{sys("drover"), sys("raw")}, 1)); !slices.Equal(got, []string{"drover", "raw"}) {
		t.Errorf("one round = %v, want each system once", got)
	}
}

// The median is an actual round's rate (work and insert each their own) among
// the rounds that succeeded (a failed round's rate is partial: it shows as 0 and
// gets no quotient), losses and duplicates of every round count, and any round's
// error is kept.
func TestMergeRounds(t *testing.T) {
	in := []result{
		{Workload: "burn-down", System: "drover", WorkPerSec: 50, InsertPerSec: 9, WorkSeconds: 1},
		{Workload: "burn-down", System: "river", WorkPerSec: 30, InsertPerSec: 5},
		{Workload: "burn-down", System: "raw", WorkPerSec: 100},
		{Workload: "burn-down", System: "river", WorkPerSec: 20, InsertPerSec: 7, Lost: 1},
		{Workload: "burn-down", System: "drover", WorkPerSec: 40, InsertPerSec: 8, WorkSeconds: 2, Error: "stalled"},
		{Workload: "burn-down", System: "drover", WorkPerSec: 45, InsertPerSec: 7, WorkSeconds: 3, Dup: 2},
		{Workload: "burn-down", System: "river", WorkPerSec: 35, InsertPerSec: 6},
	}
	out := mergeRounds(in)
	if got := []string{out[0].System, out[1].System, out[2].System}; len(out) != 3 || !slices.Equal(got, []string{"drover", "river", "raw"}) {
		t.Fatalf("merged systems = %v, want drover, river, raw once each", out)
	}
	d, r := out[0], out[1]
	if d.WorkPerSec != 45 || d.WorkSeconds != 3 || d.InsertPerSec != 7 || d.Dup != 2 || !strings.Contains(d.Error, "round 2: stalled") {
		t.Errorf("drover = %+v; want work 45 (its round, the lower middle of 50 and 45), insert 7, dup 2, round 2's error", d)
	}
	if !slices.Equal(d.WorkRounds, []float64{50, 0, 45}) {
		t.Errorf("drover rounds = %v, want 50, 0 (failed), 45 in run order", d.WorkRounds)
	}
	if r.WorkPerSec != 30 || r.InsertPerSec != 6 || r.Lost != 1 || r.Error != "" {
		t.Errorf("river = %+v; want work 30, insert 6, lost 1, no error", r)
	}
	if out[2].WorkRounds != nil || out[2].WorkPerSec != 100 {
		t.Errorf("raw ran once and = %+v; want it as it was", out[2])
	}
	var b strings.Builder
	writeRounds(&b, out)
	if !strings.Contains(b.String(), "1.67× / - / 1.29×") {
		t.Errorf("rounds lines = %q; want the quotient of each round", b.String())
	}
	b.Reset()
	writeRounds(&b, []result{
		{Workload: "burn-down", System: "drover", WorkRounds: []float64{50, 40}},
		{Workload: "burn-down", System: "river", WorkRounds: []float64{0, 20}},
		{Workload: "burn-down", System: "raw", WorkRounds: []float64{80, 100}},
		{Workload: "burn-down", System: "drover-sqlite", WorkRounds: []float64{30, 20}},
		{Workload: "burn-down", System: "raw-sqlite", WorkRounds: []float64{90}},
	})
	if !strings.Contains(b.String(), "drover/river by round: - / 2.00×") {
		t.Errorf("rounds lines = %q; want no quotient for the round river failed", b.String())
	}
	if !strings.Contains(b.String(), "drover share of raw by round: 62.5% / 40.0%") {
		t.Errorf("rounds lines = %q; want drover's share of raw in each round", b.String())
	}
	if strings.Contains(b.String(), "share of raw-sqlite") {
		t.Errorf("rounds lines = %q; want no share by round of systems that ran different rounds", b.String())
	}
}

// A failed run's figure is partial: the table shows it with ERROR on its lost/dup
// line, and makes no ratio of it.
func TestNoRatioForAFailedRun(t *testing.T) {
	rep := report{Settings: map[string]string{}, Results: []result{
		{Workload: "burn-down", Param: "1000 jobs", System: "drover", WorkPerSec: 900, InsertPerSec: 10, Lost: 400,
			Error: "stalled at 600 of 1000 completed"},
		{Workload: "burn-down", Param: "1000 jobs", System: "river", WorkPerSec: 600, InsertPerSec: 10},
	}}
	var b strings.Builder
	rep.writeTable(&b)
	if strings.Contains(b.String(), "1.50×") || !strings.Contains(b.String(), "ERROR") {
		t.Errorf("table for a failed drover run:\n%s\nwant its figures without a ratio, and ERROR", b.String())
	}
}
