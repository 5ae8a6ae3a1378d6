package main

import (
	"bytes"
	"strings"
	"testing"
)

// heapAround is a continuous run's heap over 300 s: first in the window's first
// fifth and last in its last.
func heapAround(first, last float64) []memSample {
	return []memSample{{At: 0, HeapMiB: 1}, {At: 10, HeapMiB: first}, {At: 150, HeapMiB: 40}, {At: 290, HeapMiB: last}}
}

// withHeld gives hs's samples in the first and last fifth (heapAround's) the
// jobs held.
func withHeld(hs []memSample, first, last int64) []memSample {
	hs[1].Held, hs[3].Held = first, last
	return hs
}

// theREADMERun is the README's table (the forty-third session's full run, on
// 021063c).
func theREADMERun() []result {
	bd := func(sys string, rate float64) result {
		return result{Workload: "burn-down", Param: "1000000 jobs", System: sys, WorkPerSec: rate, DBUnfinished: -1}
	}
	bl := func(size string, p50 float64) result {
		return result{Workload: "backlog", Param: size, System: "drover", StartP50: p50}
	}
	return []result{
		bd("drover", 58289), bd("river", 24992), bd("raw", 93900),
		bd("drover-sqlite", 51474), bd("raw-sqlite", 191326), bd("raw-sqlite-row", 77292),
		{Workload: "continuous", Param: "5m0s", System: "drover", WorkPerSec: 35379, WorkSeconds: 300, Heap: withHeld(heapAround(9.23, 9.56), 1000, 1199)},
		{Workload: "continuous", Param: "5m0s", System: "river", WorkPerSec: 16792},
		{Workload: "latency", Param: "1000/s for 30s", System: "drover", StartP50: 2.268925, StartP99: 9.843137},
		{Workload: "latency", Param: "1000/s for 30s", System: "river", StartP50: 3.218357, StartP99: 9.376732},
		bl("10000 rows", 1.244602), bl("1000000 rows", 1.390488), bl("5000000 rows", 1.415746),
		{Workload: "backlog", Param: "10000 rows", System: "river", StartP50: 2.106197},
		{Workload: "continuous", Param: "5m0s", System: "drover-sqlite", WorkPerSec: 33690, WorkSeconds: 300, Heap: withHeld(heapAround(11.31, 10.96), 3697, 3606)},
	}
}

// TestTargetsOfTheREADMERun: the harness's verdicts on the README's run are the
// README's: every line met but half of raw SQLite.
func TestTargetsOfTheREADMERun(t *testing.T) {
	want := []struct{ what, figure, verdict string }{
		{"burn-down 1000000 jobs: drover ≥ 1.5× river", "2.33×", "met"},
		{"continuous 5m0s: drover ≥ 1.5× river", "2.11×", "met"},
		{"latency 1000/s for 30s: drover enqueue→start p50 ≤ 5 ms, p99 ≤ 25 ms", "2.27 / 9.84 ms", "met"},
		{"backlog: drover p50 at 5000000 rows ≤ 1.3× at 10000 rows", "1.42 / 1.24 ms = 1.14×", "met"},
		{"burn-down 1000000 jobs: drover ≥ 60% of raw", "62.1%", "met"},
		{"burn-down 1000000 jobs: drover-sqlite ≥ 50% of raw-sqlite", "26.9% (66.6% of raw-sqlite-row)", "NOT MET"},
		{"continuous 5m0s: drover heap within 10% (median, first → last fifth)", "9.2 → 9.6 MiB, +4% (jobs held 1000 → 1199)", "met"},
		{"continuous 5m0s: drover-sqlite heap within 10% (median, first → last fifth)", "11.3 → 11.0 MiB, -3% (jobs held 3697 → 3606)", "met"},
		{"every workload and system: 0 lost, 0 completed twice", "0 / 0", "met"},
	}
	got := targets(theREADMERun())
	if len(got) != len(want) {
		t.Fatalf("%d targets, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if g := got[i]; g.what != w.what || g.figure != w.figure || g.verdict() != w.verdict {
			t.Errorf("target %d = %q, %q, %s; want %q, %q, %s", i, g.what, g.figure, g.verdict(), w.what, w.figure, w.verdict)
		}
	}
	var b bytes.Buffer
	writeTargets(&b, machine{}, theREADMERun())
	if !strings.Contains(b.String(), "the issue's targets") || strings.Count(b.String(), "NOT MET") != 1 {
		t.Errorf("printed targets:\n%s\nwant a heading and one NOT MET", b.String())
	}
}

// TestTargetsJudgeEachLine: each line fails on its own figure, a bound itself
// meets its line, and a failed run meets no line it is in.
func TestTargetsJudgeEachLine(t *testing.T) {
	verdicts := func(rs []result) map[string]bool {
		m := map[string]bool{}
		for _, tg := range targets(rs) {
			m[tg.what] = tg.met
		}
		return m
	}
	const (
		bdRiver   = "burn-down 1000000 jobs: drover ≥ 1.5× river"
		contRiver = "continuous 5m0s: drover ≥ 1.5× river"
		latency   = "latency 1000/s for 30s: drover enqueue→start p50 ≤ 5 ms, p99 ≤ 25 ms"
		backlog   = "backlog: drover p50 at 5000000 rows ≤ 1.3× at 10000 rows"
		pgShare   = "burn-down 1000000 jobs: drover ≥ 60% of raw"
		heap      = "continuous 5m0s: drover heap within 10% (median, first → last fifth)"
		lostDup   = "every workload and system: 0 lost, 0 completed twice"
	)
	cases := []struct {
		name   string
		change func(rs []result)
		line   string
		met    bool
	}{
		{"1.5× exactly", func(rs []result) { rs[0].WorkPerSec, rs[1].WorkPerSec = 1500, 1000 }, bdRiver, true},
		{"1.49×", func(rs []result) { rs[0].WorkPerSec, rs[1].WorkPerSec = 1490, 1000 }, bdRiver, false},
		{"continuous river faster", func(rs []result) { rs[7].WorkPerSec = 40000 }, contRiver, false},
		{"continuous drover failed", func(rs []result) { rs[6].Error = "stalled" }, contRiver, false},
		{"p99 over 25 ms", func(rs []result) { rs[8].StartP99 = 25.5 }, latency, false},
		{"p50 over 5 ms", func(rs []result) { rs[8].StartP50 = 5.1 }, latency, false},
		{"backlog 1.3× exactly", func(rs []result) { rs[10].StartP50, rs[12].StartP50 = 2.0, 2.6 }, backlog, true},
		{"backlog 1.31×", func(rs []result) { rs[10].StartP50, rs[12].StartP50 = 2.0, 2.62 }, backlog, false},
		{"backlog 1.5×", func(rs []result) { rs[12].StartP50 = 2.18 }, backlog, false},
		{"60% exactly", func(rs []result) { rs[0].WorkPerSec, rs[2].WorkPerSec = 600, 1000 }, pgShare, true},
		{"59.9%", func(rs []result) { rs[0].WorkPerSec, rs[2].WorkPerSec = 599, 1000 }, pgShare, false},
		{"raw failed", func(rs []result) { rs[2].Error = "stalled" }, pgShare, false},
		{"heap +11%", func(rs []result) { rs[6].Heap = heapAround(10, 11.1) }, heap, false},
		{"heap -11%", func(rs []result) { rs[6].Heap = heapAround(10, 8.9) }, heap, false},
		{"heap +9%", func(rs []result) { rs[6].Heap = heapAround(10, 10.9) }, heap, true},
		{"river lost a job", func(rs []result) { rs[1].Lost = 1 }, lostDup, false},
		{"raw-sqlite completed one twice", func(rs []result) { rs[4].Dup = 1 }, lostDup, false},
		{"a backlog run failed", func(rs []result) { rs[11].Error = "stalled" }, lostDup, false},
		// The database's own count is judged too (helper-21).
		{"jobs unfinished in the database", func(rs []result) { rs[0].DBUnfinished = 12 }, lostDup, false},
		// The latency line is at the rate asked (helper-21).
		{"a quarter of the rate offered", func(rs []result) { rs[8].AchievedPerSec = 250 }, latency, false},
		{"the rate offered", func(rs []result) { rs[8].AchievedPerSec = 998 }, latency, true},
	}
	for _, c := range cases {
		rs := theREADMERun()
		c.change(rs)
		got, ok := verdicts(rs)[c.line]
		if !ok || got != c.met {
			t.Errorf("%s: %q met = %v (present %v), want %v", c.name, c.line, got, ok, c.met)
		}
	}
}

// TestTargetsJudgeDurability: a run on PostgreSQL with synchronous_commit or
// fsync off says so as a line not met (helper-21: it printed every line met).
func TestTargetsJudgeDurability(t *testing.T) {
	line := func(m machine) string {
		var b bytes.Buffer
		writeTargets(&b, m, theREADMERun())
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.Contains(l, "durability not weakened") {
				return strings.Join(strings.Fields(l), " ")
			}
		}
		return ""
	}
	for _, m := range []machine{{SynchronousCommit: "off", Fsync: "on"}, {SynchronousCommit: "on", Fsync: "off"}} {
		if got := line(m); !strings.Contains(got, "weakened) NOT MET") {
			t.Errorf("synchronous_commit=%s fsync=%s: %q, want the durability line not met", m.SynchronousCommit, m.Fsync, got)
		}
	}
	if got := line(machine{SynchronousCommit: "on", Fsync: "on"}); !strings.Contains(got, "weakened) met") {
		t.Errorf("both on: %q, want the durability line met", got)
	}
	if got := line(machine{}); got != "" {
		t.Errorf("a run that did not contact PostgreSQL: %q, want no durability line", got)
	}
}

// TestTargetsLeaveOutWhatDidNotRun: a SQLite-only burn-down is judged on its
// SQLite line and on lost/dup alone, and no run prints nothing.
func TestTargetsLeaveOutWhatDidNotRun(t *testing.T) {
	rs := []result{
		{Workload: "burn-down", Param: "1000 jobs", System: "drover-sqlite", WorkPerSec: 60, Lost: 2},
		{Workload: "burn-down", Param: "1000 jobs", System: "raw-sqlite", WorkPerSec: 100},
	}
	got := targets(rs)
	if len(got) != 2 || got[0].figure != "60.0%" || !got[0].met ||
		got[1].figure != "2 / 0 (burn-down 1000 jobs on drover-sqlite: 2/0)" || got[1].met {
		t.Errorf("targets of a SQLite-only burn-down = %+v; want the SQLite share met (60.0%%) and lost/dup not met, naming the run", got)
	}
	var b bytes.Buffer
	writeTargets(&b, machine{}, nil)
	if b.Len() != 0 {
		t.Errorf("targets of no run printed %q, want nothing", b.String())
	}
}

// TestTargetsHeapNeedsFiveMinutes: the heap line is over a 5-minute run, so a
// shorter one, whose first fifth is its warm-up, is printed unjudged (neither
// met nor NOT MET), and a run of five minutes or more is judged.
func TestTargetsHeapNeedsFiveMinutes(t *testing.T) {
	for _, c := range []struct {
		param string
		heap  []memSample
		want  string
	}{
		{"5s", heapAround(4.6, 8.8), "not judged"},
		{"4m59s", heapAround(10, 10), "not judged"},
		{"5m0s", heapAround(4.6, 8.8), "NOT MET"},
		{"5m0s", heapAround(10, 10.5), "met"},
		{"10m0s", heapAround(10, 10.5), "met"},
	} {
		ts := targets([]result{{Workload: "continuous", Param: c.param, System: "drover", WorkPerSec: 100, WorkSeconds: 300, Heap: c.heap}})
		if len(ts) != 2 || ts[0].verdict() != c.want || (c.want == "not judged" && ts[0].met) {
			t.Errorf("continuous %s, heap %v: targets %+v; want the heap line %s first", c.param, c.heap, ts, c.want)
		}
	}
	var b bytes.Buffer
	writeTargets(&b, machine{}, []result{{Workload: "continuous", Param: "5s", System: "drover", WorkPerSec: 100, WorkSeconds: 300, Heap: heapAround(4.6, 8.8)}})
	if want := "not judged  4.6 → 8.8 MiB, +91% (the line is over a 5m0s run; in a 5s one the first fifth is the warm-up)"; !strings.Contains(b.String(), want) {
		t.Errorf("printed:\n%s\nwant a line with %q", b.String(), want)
	}
	b.Reset()
	writeTargets(&b, machine{}, theREADMERun())
	if strings.Contains(b.String(), "not judged") || !strings.Contains(b.String(), "met      9.2 → 9.6 MiB, +4%") || !strings.Contains(b.String(), "NOT MET  26.9%") {
		t.Errorf("the README's run printed:\n%s\nwant its heap judged, the verdicts 7 wide as before", b.String())
	}
}
