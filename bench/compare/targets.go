package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// The Done-when lines (issue 4), as the harness can check them from one
// run's results. writeTargets prints each line whose workloads ran, with the
// figure it is judged on and a verdict, so a run says for itself which targets
// it met.
const (
	targetRiverRatio = 1.5  // burn-down and continuous: Drover at least 1.5× River
	targetStartP50   = 5.0  // latency: enqueue→start p50, ms
	targetStartP99   = 25.0 // latency: enqueue→start p99, ms
	targetBacklog    = 1.3  // backlog: p50 at the largest table within 1.3× the smallest's
	targetPGShare    = 0.60 // PostgreSQL burn-down: at least 60% of raw
	targetSQLShare   = 0.50 // SQLite burn-down: at least half of raw-sqlite
	targetHeap       = 0.10 // continuous: the worker's heap within 10%
	targetOffered    = 0.95 // latency: judged only if the enqueuers offered this share of the rate
)

// targetHeapRun: the heap line is over a continuous run this long.
const targetHeapRun = 5 * time.Minute

// target is one line of the verdict: what is asked, what the run measured, and
// whether that meets it. A line whose run failed is not met, whatever its
// figure. An unjudged line is one this run is too short to tell (its figure
// says why): it is neither met nor missed.
type target struct {
	what, figure string
	met          bool
	unjudged     bool
}

func (t target) verdict() string {
	switch {
	case t.unjudged:
		return "not judged"
	case t.met:
		return "met"
	}
	return "NOT MET"
}

// targets judges results against the lines, in the order,
// leaving out each line whose workloads or systems did not run.
func targets(results []result) []target {
	by := map[[2]string]result{} // (workload, system) → its result; backlog is kept apart
	var backlog []result
	for _, r := range results {
		if r.Workload == "backlog" {
			if r.System == "drover" {
				backlog = append(backlog, r)
			}
			continue
		}
		by[[2]string{r.Workload, r.System}] = r
	}
	get := func(workload, system string) (result, bool) {
		r, ok := by[[2]string{workload, system}]
		return r, ok
	}
	var ts []target
	// quotient judges a/b ≥ bound on work rates, failing a line whose run failed.
	quotient := func(what, workload, a, b string, bound float64, percent bool, also string) {
		ra, okA := get(workload, a)
		rb, okB := get(workload, b)
		if !okA || !okB {
			return
		}
		t := target{what: fmt.Sprintf("%s %s: %s", workload, ra.Param, what)}
		switch {
		case ra.Error != "" || rb.Error != "":
			t.figure = "a run failed"
		case ra.WorkPerSec <= 0 || rb.WorkPerSec <= 0:
			t.figure = "no rate"
		default:
			q := ra.WorkPerSec / rb.WorkPerSec
			t.met = q >= bound
			if percent {
				t.figure = fmt.Sprintf("%.1f%%", 100*q)
			} else {
				t.figure = fmt.Sprintf("%.2f×", q)
			}
		}
		t.figure += also
		ts = append(ts, t)
	}
	quotient("drover ≥ 1.5× river", "burn-down", "drover", "river", targetRiverRatio, false, "")
	quotient("drover ≥ 1.5× river", "continuous", "drover", "river", targetRiverRatio, false, "")

	if r, ok := get("latency", "drover"); ok {
		t := target{what: fmt.Sprintf("latency %s: drover enqueue→start p50 ≤ %g ms, p99 ≤ %g ms", r.Param, targetStartP50, targetStartP99)}
		var rate float64
		fmt.Sscanf(r.Param, "%g/s", &rate)
		switch {
		case r.Error != "":
			t.figure = "the run failed"
		case r.StartP50 <= 0:
			// No job started (none was offered): no latency, not a met line.
			t.figure = "no latency measured"
		case rate > 0 && r.AchievedPerSec > 0 && r.AchievedPerSec < targetOffered*rate:
			// The line is at the rate asked: a run whose enqueuers fell
			// behind measured a lighter load, however fast it was.
			t.figure = fmt.Sprintf("%.2f / %.2f ms at only %.0f of %.0f jobs/s offered", r.StartP50, r.StartP99, r.AchievedPerSec, rate)
		default:
			t.figure = fmt.Sprintf("%.2f / %.2f ms", r.StartP50, r.StartP99)
			t.met = r.StartP50 <= targetStartP50 && r.StartP99 <= targetStartP99
		}
		ts = append(ts, t)
	}

	if len(backlog) >= 2 {
		small, large := backlog[0], backlog[0]
		for _, r := range backlog {
			if backlogRows(r) < backlogRows(small) {
				small = r
			}
			if backlogRows(r) > backlogRows(large) {
				large = r
			}
		}
		t := target{what: fmt.Sprintf("backlog: drover p50 at %s ≤ %g× at %s", large.Param, targetBacklog, small.Param)}
		switch {
		case small.Error != "" || large.Error != "":
			t.figure = "a run failed"
		case small.StartP50 <= 0:
			t.figure = "no latency"
		default:
			q := large.StartP50 / small.StartP50
			t.figure = fmt.Sprintf("%.2f / %.2f ms = %.2f×", large.StartP50, small.StartP50, q)
			t.met = q <= targetBacklog
		}
		ts = append(ts, t)
	}

	quotient("drover ≥ 60% of raw", "burn-down", "drover", "raw", targetPGShare, true, "")
	also := ""
	if d, ok := get("burn-down", "drover-sqlite"); ok && d.Error == "" {
		if row, ok := get("burn-down", "raw-sqlite-row"); ok && row.Error == "" && row.WorkPerSec > 0 {
			also = fmt.Sprintf(" (%.1f%% of raw-sqlite-row)", 100*d.WorkPerSec/row.WorkPerSec)
		}
	}
	quotient("drover-sqlite ≥ 50% of raw-sqlite", "burn-down", "drover-sqlite", "raw-sqlite", targetSQLShare, true, also)

	for _, sys := range []string{"drover", "drover-sqlite"} {
		r, ok := get("continuous", sys)
		if !ok || len(r.Heap) == 0 {
			continue
		}
		t := target{what: fmt.Sprintf("continuous %s: %s heap within %.0f%% (median, first → last fifth)", r.Param, sys, 100*targetHeap)}
		first, last := heapFifths(r.Heap, r.WorkSeconds)
		switch {
		case r.Error != "":
			t.figure = "the run failed"
		case first <= 0:
			t.figure = "no heap sample"
		default:
			change := (last - first) / first
			t.figure = fmt.Sprintf("%.1f → %.1f MiB, %+.0f%%", first, last, 100*change)
			// The heap follows the jobs held (each holds its job and its
			// execution until its outcome is durable, and its context, timer
			// and goroutine while its handler runs): say how many, so a
			// change that is theirs reads as such.
			if hf, hl := heldFifths(r.Heap, r.WorkSeconds); hf > 0 || hl > 0 {
				t.figure += fmt.Sprintf(" (jobs held %.0f → %.0f", hf, hl)
				// Said beside the verdict, which stays the plain
				// medians: the heap for the same work, a fitted cost a job
				// held taken out of every sample.
				if nf, nl, b, ok := netHeldFifths(r.Heap, r.WorkSeconds); ok && nf > 0 {
					t.figure += fmt.Sprintf("; net of them %.1f → %.1f MiB, %+.0f%%, at %.0f B a job", nf, nl, 100*(nl-nf)/nf, b)
				}
				t.figure += ")"
			}
			// The line is over five minutes: in a shorter run the first fifth
			// is the worker filling its slots and buffers, so a rise says
			// nothing of a leak.
			if d, err := time.ParseDuration(r.Param); err == nil && d < targetHeapRun {
				t.unjudged = true
				t.figure += fmt.Sprintf(" (the line is over a %s run; in a %s one the first fifth is the warm-up)", targetHeapRun, r.Param)
				break
			}
			t.met = math.Abs(change) <= targetHeap
			// SQLite's memory is outside the Go heap (modernc.org/libc's
			// own): said beside the verdict, which is the Go heap's, as the
			// process's resident anonymous memory, which holds it. Its page
			// caches fill as the table grows, up to cache_size a connection
			// (README, Performance).
			if rf, rl := rssFifths(r.Heap, r.WorkSeconds); strings.HasSuffix(sys, "-sqlite") && rf > 0 {
				t.figure += fmt.Sprintf("; the process's anonymous RSS (less the harness's tracker), with SQLite's own memory, %.1f → %.1f MiB, %+.0f%% (not judged)", rf, rl, 100*(rl-rf)/rf)
			}
		}
		ts = append(ts, t)
	}

	if len(results) > 0 {
		var lost, dup int64
		var where []string
		failed, unfinished := false, false
		for _, r := range results {
			lost += r.Lost
			dup += r.Dup
			switch {
			case r.Error != "":
				failed = true
				where = append(where, fmt.Sprintf("%s %s on %s failed", r.Workload, r.Param, r.System))
			case r.Lost != 0 || r.Dup != 0:
				where = append(where, fmt.Sprintf("%s %s on %s: %d/%d", r.Workload, r.Param, r.System, r.Lost, r.Dup))
			}
			if r.Error == "" && r.DBUnfinished > 0 {
				// The database's own count, apart from the tracker's: a job
				// it still holds unfinished after the drain is lost too.
				unfinished = true
				where = append(where, fmt.Sprintf("%s %s on %s: %d unfinished in the database", r.Workload, r.Param, r.System, r.DBUnfinished))
			}
		}
		// A run that failed did not count all its jobs: it cannot show 0 / 0.
		t := target{what: "every workload and system: 0 lost, 0 completed twice", figure: fmt.Sprintf("%d / %d", lost, dup),
			met: lost == 0 && dup == 0 && !failed && !unfinished}
		if len(where) > 0 {
			t.figure += " (" + strings.Join(where, "; ") + ")"
		}
		ts = append(ts, t)
	}
	return ts
}

// backlogRows is the table size a backlog result ran at (its Param, "N rows").
func backlogRows(r result) int64 {
	var n int64
	fmt.Sscanf(r.Param, "%d", &n)
	return n
}

// durability is the line the issue sets on every other: "never by weakening
// durability". A run on PostgreSQL with synchronous_commit or fsync off
// printed every line met; its header showed the setting, and nothing read
// it. None for a run that did not contact PostgreSQL.
func durability(m machine) []target {
	if m.SynchronousCommit == "" && m.Fsync == "" {
		return nil
	}
	return []target{{what: "postgresql: synchronous_commit and fsync on (durability not weakened)",
		figure: fmt.Sprintf("synchronous_commit=%s, fsync=%s", m.SynchronousCommit, m.Fsync),
		met:    m.SynchronousCommit == "on" && m.Fsync == "on"}}
}

// writeTargets prints the verdict of each of the lines that this run
// can judge, and nothing when it can judge none.
func writeTargets(w io.Writer, m machine, results []result) {
	ts := targets(results)
	if len(ts) > 0 {
		ts = append(durability(m), ts...)
	}
	if len(ts) == 0 {
		return
	}
	fmt.Fprintln(w, "\nthe issue's targets, judged on this run (medians where the burn-down ran in rounds):")
	width, vwidth := 0, 0
	for _, t := range ts {
		width = max(width, utf8.RuneCountInString(t.what))
		vwidth = max(vwidth, len(t.verdict()))
	}
	for _, t := range ts {
		pad := strings.Repeat(" ", width-utf8.RuneCountInString(t.what))
		fmt.Fprintf(w, "  %s%s  %-*s  %s\n", t.what, pad, vwidth, t.verdict(), t.figure)
	}
}
