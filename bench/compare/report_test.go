package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHeapFifths: the medians cover the first and last fifth of the window,
// leave out the sample taken before the load started, and a spike moves
// neither.
func TestHeapFifths(t *testing.T) {
	hs := []memSample{{At: 0, HeapMiB: 1}, {At: 5, HeapMiB: 10}, {At: 8, HeapMiB: 90}, {At: 10, HeapMiB: 20},
		{At: 30, HeapMiB: 99}, {At: 50, HeapMiB: 30}, {At: 60, HeapMiB: 40}}
	first, last := heapFifths(hs, 60)
	if first != 20 || last != 35 {
		t.Errorf("heapFifths = %v, %v; want 20 (median of the samples at 5, 8 and 10 s), 35 (at 50 s and 60 s)", first, last)
	}
	for i := range hs {
		hs[i].Held = int64(100 * hs[i].HeapMiB)
	}
	if first, last := heldFifths(hs, 60); first != 2000 || last != 3500 {
		t.Errorf("heldFifths = %v, %v; want 2000 and 3500, the same samples' jobs held", first, last)
	}
}

// TestNetHeldFifths: a heap that is a fixed base plus a cost a job held is
// flat net of the jobs held, however many each fifth caught, and a base that
// grew shows as growth; without a varying count nothing is fitted.
func TestNetHeldFifths(t *testing.T) {
	const perJob = 1500.0 / (1 << 20) // MiB a job held
	var hs []memSample
	held := []int64{2000, 1500, 2000, 0, 1000, 2000, 1500, 2000, 500, 2000}
	for i := range 100 {
		h := held[i%len(held)]
		if i >= 80 {
			h = 0 // the last fifth finds the worker between claims
		}
		hs = append(hs, memSample{At: float64(i + 1), HeapMiB: 8 + perJob*float64(h), Held: h})
	}
	hs = append([]memSample{{At: 0, HeapMiB: 1}}, hs...) // before the load: left out
	first, last := heapFifths(hs, 100)
	if (last-first)/first > -0.1 {
		t.Fatalf("plain medians %v → %v: the case should move them by more than 10%%", first, last)
	}
	nf, nl, b, ok := netHeldFifths(hs, 100)
	if !ok || math.Abs(nf-8) > 1e-9 || math.Abs(nl-8) > 1e-9 || math.Abs(b-1500) > 1e-6 {
		t.Errorf("netHeldFifths = %v, %v, %v B, %v; want 8, 8, 1500 B, true", nf, nl, b, ok)
	}
	// The heap line says it beside its verdict, which stays the plain medians.
	ts := targets([]result{{Workload: "continuous", Param: "5m0s", System: "drover", WorkPerSec: 100, WorkSeconds: 100, Heap: hs}})
	if len(ts) != 2 || ts[0].met || !strings.Contains(ts[0].figure, "(jobs held 1750 → 0; net of them 8.0 → 8.0 MiB, +0%, at 1500 B a job)") {
		t.Errorf("targets = %+v; want the heap line not met, with the jobs held and the heap net of them", ts)
	}
	// A heap that grew by 2 MiB for the same work, the jobs held coming and
	// going alike throughout, shows it net of them.
	var grew []memSample
	for i := range 100 {
		h, base := held[i%len(held)], 8.0
		if i >= 80 {
			base += 2
		}
		grew = append(grew, memSample{At: float64(i + 1), HeapMiB: base + perJob*float64(h), Held: h})
	}
	if nf, nl, _, _ := netHeldFifths(grew, 100); nl-nf < 1.5 {
		t.Errorf("netHeldFifths = %v, %v; want the last fifth ~2 MiB up", nf, nl)
	}
	flat := make([]memSample, 100)
	for i := range flat {
		flat[i] = memSample{At: float64(i + 1), HeapMiB: 5 + float64(i%3), Held: 7}
	}
	if _, _, _, ok := netHeldFifths(flat, 100); ok {
		t.Error("netHeldFifths fitted a cost a job from a count that never varied")
	}
	if _, _, _, ok := netHeldFifths(hs[:20], 20); ok {
		t.Error("netHeldFifths fitted a cost a job from 20 samples")
	}
}

// TestPrintSaved: a report saved with -o json prints the same table as the
// run that saved it, rounds and heap included.
func TestPrintSaved(t *testing.T) {
	rep := report{
		Machine:  machine{CPUs: 2, GOMAXPROCS: 2, GoVersion: "go1.26", OS: "linux/amd64"},
		Settings: map[string]string{"concurrency": "2000"},
		Results: []result{
			{Workload: "burn-down", Param: "1000 jobs", System: "drover", Jobs: 1000, WorkPerSec: 500, WorkRounds: []float64{400, 500, 600}},
			{Workload: "burn-down", Param: "1000 jobs", System: "river", Jobs: 1000, WorkPerSec: 250, WorkRounds: []float64{200, 250, 300}},
			{Workload: "continuous", Param: "10s", System: "drover", WorkPerSec: 300, WorkSeconds: 10,
				Heap: []memSample{{At: 0, HeapMiB: 1}, {At: 1, HeapMiB: 10}, {At: 9, HeapMiB: 11, InFlight: 7}}},
		},
	}
	var want, saved, got bytes.Buffer
	rep.writeTable(&want)
	if err := rep.writeJSON(&saved); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(path, saved.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := printSaved(path, &got); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("saved report prints\n%s\nwant\n%s", got.String(), want.String())
	}
	for _, s := range []string{"2.00×", "10.0→11.0"} {
		if !strings.Contains(got.String(), s) {
			t.Errorf("saved report's table lacks %q:\n%s", s, got.String())
		}
	}
	if err := os.WriteFile(path, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := printSaved(path, &got); err == nil || !strings.Contains(err.Error(), "not a report") {
		t.Errorf("printSaved of a file that is not a report: %v, want an error saying so", err)
	}
}

// TestWriteShares: each Drover driver's work rate is divided by its raw
// baselines' of the same workload, and a failed run gives no share.
func TestWriteShares(t *testing.T) {
	bd := func(sys string, rate float64) result {
		return result{Workload: "burn-down", Param: "1000 jobs", System: sys, WorkPerSec: rate}
	}
	results := []result{
		bd("drover", 500), bd("river", 250), bd("raw", 1000),
		bd("drover-sqlite", 100), bd("raw-sqlite", 400), bd("raw-sqlite-row", 200),
		{Workload: "continuous", Param: "10s", System: "drover", WorkPerSec: 300},
		{Workload: "continuous", Param: "10s", System: "raw", WorkPerSec: 900, Error: "stalled"},
		{Workload: "latency", Param: "1000/s", System: "drover", StartP50: 1},
	}
	var b bytes.Buffer
	writeShares(&b, results)
	want := "burn-down 1000 jobs work jobs/s, share of raw: drover 50.0% of raw, drover-sqlite 25.0% of raw-sqlite, drover-sqlite 50.0% of raw-sqlite-row\n"
	if b.String() != want {
		t.Errorf("writeShares printed\n%q\nwant\n%q", b.String(), want)
	}
}
