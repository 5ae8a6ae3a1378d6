package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"
)

type report struct {
	Started  string            `json:"started,omitempty"` // when the run began (RFC 3339, UTC)
	Machine  machine           `json:"machine"`
	Settings map[string]string `json:"settings"`
	Results  []result          `json:"results"`
}

func describeSettings(o opts, k knobs, rk riverKnobs, wl []string) map[string]string {
	def := func(v int, d string) string {
		if v == 0 {
			return d
		}
		return fmt.Sprint(v)
	}
	riverInsert := "InsertMany"
	if rk.insertFast {
		riverInsert = "InsertManyFast"
	}
	return map[string]string{
		"workloads":               strings.Join(wl, ","),
		"concurrency":             fmt.Sprint(k.concurrency),
		"claim_batch":             def(k.claimBatch, fmt.Sprintf("drover default (raw %d)", rawDefaultClaimBatch)),
		"completion_batch":        def(k.completionBatch, fmt.Sprintf("drover default (raw %d)", rawDefaultCompletionBatch)),
		"drover_poll_interval":    def(k.pollInterval, "drover default"),
		"insert_batch":            fmt.Sprint(o.insertBatch),
		"insert_workers":          fmt.Sprint(o.insertWorkers),
		"max_pending":             fmt.Sprint(o.maxPending),
		"river_max_workers":       fmt.Sprint(rk.maxWorkers),
		"river_fetch_cooldown":    rk.fetchCooldown.String(),
		"river_fetch_poll":        rk.fetchPoll.String(),
		"river_insert":            riverInsert,
		"backlog_future_fraction": fmt.Sprint(o.backlogFuture),
		"backlog_jobs":            fmt.Sprint(o.backlogJobs),
	}
}

// printSaved writes the table of the report saved (with -o json) in path.
func printSaved(path string, w io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: not a report saved with -o json: %w", path, err)
	}
	if len(r.Results) == 0 {
		return fmt.Errorf("%s: the report has no results", path)
	}
	r.writeTable(w)
	return nil
}

// failed is nil when every workload ran to its end, and otherwise an error
// that counts the runs that failed, whose causes the report printed (ERROR):
// a run with a failed workload exits non-zero.
func (r report) failed() error {
	n := 0
	for _, res := range r.Results {
		if res.Error != "" {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d workload runs failed; the report says why (ERROR)", n, len(r.Results))
}

func (r report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// row is one line of the table: a workload's metric across systems.
type row struct {
	workload, metric string
	vals             map[string]string
	drover, river    float64 // for the ratio; 0: none
	hasRatio         bool
	failed           bool // a system's run behind this row failed
}

func (r report) writeTable(w io.Writer) {
	m := r.Machine
	// The run's time, not the printing's: --table-from prints a saved run.
	started := r.Started
	if started == "" {
		started = "(a report saved without its run's time)"
	}
	fmt.Fprintf(w, "Drover vs River — %s\n", started)
	fmt.Fprintf(w, "machine:  %d CPUs (GOMAXPROCS %d), %s, %s\n", m.CPUs, m.GOMAXPROCS, m.OS, m.GoVersion)
	if m.PostgreSQL == "" {
		fmt.Fprintln(w, "postgres: not contacted (--sqlite-only)")
	} else {
		fmt.Fprintf(w, "postgres: %s, synchronous_commit=%s, fsync=%s, full_page_writes=%s, shared_buffers=%s, max_connections=%s, autovacuum=%s; pool %d conns per system\n",
			m.PostgreSQL, m.SynchronousCommit, m.Fsync, m.FullPageWrites, m.SharedBuffers, m.MaxConnections, m.Autovacuum, m.PoolMaxConns)
	}
	fmt.Fprintf(w, "versions: drover %s, river %s\n", orQ(m.DroverCommit), m.RiverVersion)
	s := r.Settings
	fmt.Fprintf(w, "drover/raw: concurrency %s, claim batch %s, completion batch %s, poll %s; inserts: %s a statement, %s inserter(s)\n",
		s["concurrency"], s["claim_batch"], s["completion_batch"], s["drover_poll_interval"], s["insert_batch"], s["insert_workers"])
	fmt.Fprintf(w, "river:      MaxWorkers %s, FetchCooldown %s, FetchPollInterval %s (riverbench's), %s\n",
		s["river_max_workers"], s["river_fetch_cooldown"], s["river_fetch_poll"], s["river_insert"])
	fmt.Fprintf(w, "command:  %s\n\n", m.CommandLine)

	var systems []string
	for _, res := range r.Results {
		if !contains(systems, res.System) {
			systems = append(systems, res.System)
		}
	}
	// Column order: drover, river, ratio, then the rest.
	order := []string{}
	for _, s := range []string{"drover", "river", "raw", "drover-sqlite", "river-sqlite", "raw-sqlite", "raw-sqlite-row"} {
		if contains(systems, s) {
			order = append(order, s)
		}
	}

	var rows []*row
	find := func(workload, metric string, ratio bool) *row {
		for _, x := range rows {
			if x.workload == workload && x.metric == metric {
				return x
			}
		}
		x := &row{workload: workload, metric: metric, vals: map[string]string{}, hasRatio: ratio}
		rows = append(rows, x)
		return x
	}
	put := func(res result, metric string, v float64, format string, ratio bool) {
		x := find(res.Workload+" "+res.Param, metric, ratio)
		x.vals[res.System] = fmt.Sprintf(format, v)
		if res.Error != "" {
			// A failed run's figure is partial (what finished before it
			// stalled, say): shown, but no quotient is made of it.
			x.failed = true
		}
		switch res.System {
		case "drover":
			x.drover = v
		case "river":
			x.river = v
		}
	}
	putS := func(res result, metric, v string) {
		find(res.Workload+" "+res.Param, metric, false).vals[res.System] = v
	}
	putCPU := func(res result) {
		if res.CPUProcessUS > 0 {
			putS(res, cpuMetric, fmtCPU(res.CPUProcessUS, res.CPURestUS))
		}
	}
	var errs []string
	for _, res := range r.Results {
		if res.Error != "" {
			errs = append(errs, fmt.Sprintf("%s %s on %s: %s", res.Workload, res.Param, res.System, res.Error))
		}
		switch res.Workload {
		case "burn-down":
			put(res, "insert jobs/s", res.InsertPerSec, "%.0f", true)
			put(res, "work jobs/s", res.WorkPerSec, "%.0f", true)
			putCPU(res)
		case "continuous":
			put(res, "jobs/s", res.WorkPerSec, "%.0f", true)
			put(res, "inserted/s", res.InsertPerSec, "%.0f", true)
			putCPU(res)
			if len(res.Heap) > 0 {
				first, last := heapFifths(res.Heap, res.WorkSeconds)
				lo, hi := res.Heap[0].HeapMiB, res.Heap[0].HeapMiB
				for _, h := range res.Heap {
					lo, hi = min(lo, h.HeapMiB), max(hi, h.HeapMiB)
				}
				putS(res, "heap MiB median 1st→5th fifth", fmt.Sprintf("%.1f→%.1f (%+.0f%%)", first, last, 100*(last-first)/first))
				putS(res, "heap MiB min..max", fmt.Sprintf("%.1f..%.1f", lo, hi))
				if rf, rl := rssFifths(res.Heap, res.WorkSeconds); rf > 0 {
					putS(res, "anon RSS MiB 1st→5th fifth", fmt.Sprintf("%.1f→%.1f (%+.0f%%)", rf, rl, 100*(rl-rf)/rf))
				}
			}
		case "latency", "backlog":
			// Enqueue to start: the enqueue's round trips are in it (River's
			// insert is a transaction of three statements, Drover's one), and a
			// backlog row's is what its claim takes with the table that big.
			name := "start"
			if res.Workload == "backlog" {
				name = "enqueue→start"
			}
			put(res, name+" p50 ms", res.StartP50, "%.2f", true)
			put(res, name+" p99 ms", res.StartP99, "%.2f", true)
			put(res, "finish p50 ms", res.FinishP50, "%.2f", true)
			put(res, "finish p99 ms", res.FinishP99, "%.2f", true)
			if res.Workload == "latency" {
				put(res, "start p99 ms, from schedule", res.StartP99Sched, "%.2f", true)
				put(res, "finish p99 ms, from schedule", res.FinishP99Sched, "%.2f", true)
				put(res, "offered jobs/s", res.AchievedPerSec, "%.0f", false)
			}
		}
		lostDup := fmt.Sprintf("%d/%d", res.Lost, res.Dup)
		if res.DBUnfinished > 0 {
			lostDup += fmt.Sprintf(" (db: %d unfinished)", res.DBUnfinished)
		}
		if res.Error != "" {
			lostDup += " ERROR"
		}
		putS(res, "lost/dup", lostDup)
	}

	header := []string{"workload", "metric"}
	var ratioAfter int = -1
	for i, s := range order {
		header = append(header, s)
		if s == "river" {
			ratioAfter = i
		}
	}
	if ratioAfter >= 0 && contains(order, "drover") {
		header = insertAt(header, 2+ratioAfter+1, "drover/river")
	} else {
		ratioAfter = -1
	}
	table := [][]string{header}
	prev := ""
	for _, x := range rows {
		wl := x.workload
		if wl == prev {
			wl = ""
		}
		prev = x.workload
		cells := []string{wl, x.metric}
		for _, s := range order {
			v, ok := x.vals[s]
			if !ok {
				v = "-"
			}
			cells = append(cells, v)
		}
		if ratioAfter >= 0 {
			ratio := ""
			if x.hasRatio && !x.failed && x.drover > 0 && x.river > 0 {
				ratio = fmt.Sprintf("%.2f×", x.drover/x.river)
			}
			cells = insertAt(cells, 2+ratioAfter+1, ratio)
		}
		table = append(table, cells)
	}
	writeAligned(w, table)
	fmt.Fprintln(w, "\njobs/s: higher is better; ms: lower is better; lost/dup must be 0/0. drover/river is the plain quotient.")
	fmt.Fprintln(w, cpuNote)
	writeShares(w, r.Results)
	writeRounds(w, r.Results)
	if file := r.Settings["explain"]; file != "" {
		fmt.Fprintf(w, "\nthe issue's targets: not judged: this run explained every statement to %s (--explain), which slows them\n", file)
	} else {
		writeTargets(w, r.Machine, r.Results)
	}
	for _, e := range errs {
		fmt.Fprintln(w, "ERROR:", e)
	}
}

// writeAligned prints rows as columns: the first two left-aligned, the others
// right-aligned, two spaces apart.
func writeAligned(w io.Writer, table [][]string) {
	width := map[int]int{}
	for _, r := range table {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range table {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < 2 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

func insertAt(xs []string, i int, v string) []string {
	xs = append(xs, "")
	copy(xs[i+1:], xs[i:])
	xs[i] = v
	return xs
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// heapFifths returns the median heap of the samples in the first and in the
// last fifth of a window of win seconds, leaving out the sample taken at its
// start. Medians, not means: a completion write that stalls for a moment piles
// up finished jobs, and a few such samples moved a fifth's mean by several
// percent.
func heapFifths(hs []memSample, win float64) (first, last float64) {
	return fifths(hs, win, func(h memSample) float64 { return h.HeapMiB })
}

// rssFifths is heapFifths for the process's resident anonymous memory; 0, 0
// where it was not read.
func rssFifths(hs []memSample, win float64) (first, last float64) {
	if len(hs) == 0 || hs[0].RSSMiB <= 0 {
		return 0, 0
	}
	return fifths(hs, win, func(h memSample) float64 { return h.RSSMiB })
}

// heldFifths is heapFifths for the jobs the worker held at each sample, which
// the heap follows (Drover only; 0, 0 without a count).
func heldFifths(hs []memSample, win float64) (first, last float64) {
	return fifths(hs, win, func(h memSample) float64 { return float64(h.Held) })
}

// minFitSamples: a fit over fewer samples (a run shorter than half a
// minute) says nothing of a cost a job.
const minFitSamples = 30

// netHeldFifths is heapFifths net of the jobs held: each sample less
// perJob MiB for every job held, perJob fitted by least squares over the
// window's samples (the one at its start left out, as in fifths). It says
// whether the heap grew for the same work, which the plain medians cannot
// when a fifth catches the worker holding fewer jobs (an inserter that fell
// behind, a worker between claims). It is a reading aid beside the verdict,
// not the verdict: growth that came just as the count changed for good is
// partly put down to the jobs by the fit. ok is false without a held count, with
// fewer than minFitSamples samples, or when the fit gives no positive cost a
// job (a count that never varied, or a heap that does not follow it).
func netHeldFifths(hs []memSample, win float64) (first, last, perJobBytes float64, ok bool) {
	var n, sx, sy, sxx, sxy float64
	for _, h := range hs {
		if h.At <= 0 || h.At > win {
			continue
		}
		x, y := float64(h.Held), h.HeapMiB
		n, sx, sy, sxx, sxy = n+1, sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	varX := n*sxx - sx*sx
	if n < minFitSamples || varX <= 0 {
		return 0, 0, 0, false
	}
	perJob := (n*sxy - sx*sy) / varX
	if perJob <= 0 {
		return 0, 0, 0, false
	}
	first, last = fifths(hs, win, func(h memSample) float64 { return h.HeapMiB - perJob*float64(h.Held) })
	return first, last, perJob * (1 << 20), true
}

func fifths(hs []memSample, win float64, v func(memSample) float64) (first, last float64) {
	var f, l []float64
	for _, h := range hs {
		if h.At > 0 && h.At <= win/5 { // the sample at 0 precedes the load
			f = append(f, v(h))
		}
		if h.At >= win*4/5 {
			l = append(l, v(h))
		}
	}
	if len(f) == 0 || len(l) == 0 {
		return v(hs[0]), v(hs[len(hs)-1])
	}
	return median(f), median(l)
}

// rawShares are the (system, baseline) pairs whose work rate writeShares
// divides: each Drover driver against the raw baseline of its database,
// drover-sqlite also against raw's loop on Drover's own row (rawSQLiteRow), and
// River on SQLite against raw SQLite, what the reference queue gets of it.
var rawShares = [][2]string{{"drover", "raw"}, {"drover-sqlite", "raw-sqlite"}, {"drover-sqlite", "raw-sqlite-row"}, {"river-sqlite", "raw-sqlite"}}

// writeShares prints, for each burn-down and continuous run, each Drover
// driver's work rate as a share of its raw baselines' in the same run. A failed
// run has no share.
func writeShares(w io.Writer, results []result) {
	type key struct{ workload, param string }
	rates := map[key]map[string]float64{}
	var keys []key
	for _, res := range results {
		if res.Workload != "burn-down" && res.Workload != "continuous" {
			continue
		}
		k := key{res.Workload, res.Param}
		if rates[k] == nil {
			rates[k] = map[string]float64{}
			keys = append(keys, k)
		}
		if res.Error == "" && res.WorkPerSec > 0 {
			rates[k][res.System] = res.WorkPerSec
		}
	}
	for _, k := range keys {
		var shares []string
		for _, p := range rawShares {
			sys, base := rates[k][p[0]], rates[k][p[1]]
			if sys > 0 && base > 0 {
				shares = append(shares, fmt.Sprintf("%s %.1f%% of %s", p[0], 100*sys/base, p[1]))
			}
		}
		if len(shares) > 0 {
			fmt.Fprintf(w, "%s %s work jobs/s, share of raw: %s\n", k.workload, k.param, strings.Join(shares, ", "))
		}
	}
}

// writeRounds prints, for a burn-down run in rounds, each round's work rate of
// the systems that ran more than once, the drover/river quotient of each round
// and each round's share of raw (rawShares); the table above shows the medians
// and lost/dup summed over the rounds.
func writeRounds(w io.Writer, results []result) {
	rounds := map[string][]float64{}
	for _, res := range results {
		if res.Workload != "burn-down" || len(res.WorkRounds) == 0 {
			continue
		}
		figs := make([]string, len(res.WorkRounds))
		for i, v := range res.WorkRounds {
			figs[i] = fmt.Sprintf("%.0f", v)
		}
		fmt.Fprintf(w, "burn-down work jobs/s of %s by round: %s (the table shows the median; lost/dup are summed)\n",
			res.System, strings.Join(figs, " / "))
		rounds[res.System] = res.WorkRounds
	}
	// byRound formats f of each round in which both a and b have a rate (a
	// round that failed has none), or answers false when they did not run the
	// same rounds.
	byRound := func(a, b []float64, f func(x, y float64) string) (string, bool) {
		if len(a) == 0 || len(a) != len(b) {
			return "", false
		}
		q := make([]string, len(a))
		for i := range a {
			q[i] = "-"
			if a[i] > 0 && b[i] > 0 {
				q[i] = f(a[i], b[i])
			}
		}
		return strings.Join(q, " / "), true
	}
	if q, ok := byRound(rounds["drover"], rounds["river"], func(x, y float64) string { return fmt.Sprintf("%.2f×", x/y) }); ok {
		fmt.Fprintf(w, "burn-down drover/river by round: %s\n", q)
	}
	for _, p := range rawShares {
		if q, ok := byRound(rounds[p[0]], rounds[p[1]], func(x, y float64) string { return fmt.Sprintf("%.1f%%", 100*x/y) }); ok {
			fmt.Fprintf(w, "burn-down %s share of %s by round: %s\n", p[0], p[1], q)
		}
	}
}

// median is the middle of xs (the mean of the two middle values for an even
// count); xs is sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
