package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// explainSetup loads auto_explain into a session and has it send the plan of
// every statement the session runs, with its actual times and buffers
// (EXPLAIN (ANALYZE, BUFFERS)), to the client as a NOTICE. The GUCs are
// superuser-only, as LOAD is unless the library sits in $libdir/plugins.
// Nested statements are left out: the hot statements are plain SQL.
const explainSetup = `LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_analyze = on;
SET auto_explain.log_buffers = on;
SET auto_explain.log_timing = on;
SET auto_explain.log_nested_statements = off;
SET auto_explain.log_format = text;
SET auto_explain.log_level = notice;
SET client_min_messages = notice`

// explainSamples is how many plans of a statement are kept (a uniform sample
// of its calls) to print the one nearest its median duration.
const explainSamples = 32

// explainLog collects the plans auto_explain sends on the pools of the systems
// under test, by system and statement, and writes them out (--explain). Every
// call is counted; a uniform sample of each statement's plans is kept, and its
// slowest.
type explainLog struct {
	mu      sync.Mutex
	systems []string // in the order they first sent a plan
	stmts   map[explainKey]*stmtPlans
	rng     *rand.Rand
	garbled int // notices that were not a plan
}

type explainKey struct{ system, query string }

type planSample struct {
	ms   float64
	plan string
}

type stmtPlans struct {
	calls   int64
	rows    int64           // the top plan node's actual rows × loops, summed
	took    []time.Duration // each call's
	sample  []planSample
	slowest planSample
}

func newExplainLog() *explainLog {
	return &explainLog{stmts: map[explainKey]*stmtPlans{}, rng: rand.New(rand.NewPCG(1, 2))}
}

// configure has every connection of a pool for system explain its statements
// to l. A nil l leaves cfg alone.
func (l *explainLog) configure(system string, cfg *pgxpool.Config) {
	if l == nil {
		return
	}
	prev := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if prev != nil {
			if err := prev(ctx, c); err != nil {
				return err
			}
		}
		if _, err := c.Exec(ctx, explainSetup); err != nil {
			return fmt.Errorf("--explain: load auto_explain (needs a superuser, or auto_explain in $libdir/plugins): %w", err)
		}
		return nil
	}
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { l.add(system, n.Message) }
}

var (
	// "duration: 9.064 ms  plan:", the head of every plan auto_explain sends.
	explainHead = regexp.MustCompile(`^duration: ([0-9.]+) ms\s+plan:\n`)
	// The plan's top node, the first unindented line with estimates and
	// actuals: the query text before it cannot be told from the plan otherwise.
	explainTop = regexp.MustCompile(`(?m)^\S.*\(cost=[0-9.]+\.\.[0-9.]+ rows=\d+ width=\d+\) \(actual (?:time=[0-9.]+\.\.[0-9.]+ )?rows=\d+ loops=\d+\)`)
	// A node's actual rows and loops, wherever it is in the plan.
	explainActual = regexp.MustCompile(`\(actual (?:time=[0-9.]+\.\.[0-9.]+ )?rows=(\d+) loops=(\d+)\)`)
	explainText   = "Query Text: "
)

// planRows is the rows a plan's top node gave, or, for an INSERT, UPDATE or
// DELETE that returns none (whose top node gives 0), the rows its first child
// fed it: the rows the statement wrote, or tried to.
func planRows(plan string) int64 {
	rows := func(s string) int64 {
		m := explainActual.FindStringSubmatch(s)
		if m == nil {
			return 0
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		loops, _ := strconv.ParseInt(m[2], 10, 64)
		return n * loops
	}
	top, rest, _ := strings.Cut(plan, "\n")
	n := rows(top)
	if n > 0 || !strings.Contains(top, " on ") || !slices.ContainsFunc([]string{"Insert ", "Update ", "Delete ", "Merge "},
		func(p string) bool { return strings.HasPrefix(top, p) }) {
		return n
	}
	for _, line := range strings.Split(rest, "\n") {
		if strings.HasPrefix(line, "  ->  ") { // a child of the top node, not of an InitPlan under it
			return rows(line)
		}
	}
	return 0
}

// add files one notice of system's: a plan, or a notice of another kind,
// which is counted and dropped.
func (l *explainLog) add(system, msg string) {
	m := explainHead.FindStringSubmatch(msg)
	if m == nil || !strings.HasPrefix(msg[len(m[0]):], explainText) {
		l.mu.Lock()
		l.garbled++
		l.mu.Unlock()
		return
	}
	ms, _ := strconv.ParseFloat(m[1], 64)
	body := msg[len(m[0])+len(explainText):]
	query, plan := body, ""
	var rows int64
	if loc := explainTop.FindStringIndex(body); loc != nil {
		query, plan = body[:loc[0]], body[loc[0]:]
		rows = planRows(plan)
	}
	key := explainKey{system, strings.TrimSpace(query)}

	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stmts[key]
	if s == nil {
		if !slices.Contains(l.systems, system) {
			l.systems = append(l.systems, system)
		}
		s = &stmtPlans{}
		l.stmts[key] = s
	}
	s.calls++
	s.rows += rows
	s.took = append(s.took, time.Duration(ms*float64(time.Millisecond)))
	p := planSample{ms, plan}
	if ms >= s.slowest.ms {
		s.slowest = p
	}
	if len(s.sample) < explainSamples {
		s.sample = append(s.sample, p)
	} else if i := l.rng.Int64N(s.calls); i < explainSamples {
		s.sample[i] = p
	}
}

// write prints, for each system, its statements by the time PostgreSQL spent
// in them: calls, total, rows, the spread of a call's duration, and the plans
// of a median call and of the slowest, for those that took at least 1% of the
// system's time.
func (l *explainLog) write(out io.Writer) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := bufio.NewWriter(out)
	fmt.Fprintln(w, "# bench/compare --explain: every statement the systems' pools ran, as auto_explain saw it")
	fmt.Fprintln(w, "# (EXPLAIN (ANALYZE, BUFFERS), timing on). Timing every plan node slows each statement, so")
	fmt.Fprintln(w, "# the run's throughput and latency are not comparable with a run without --explain; the")
	fmt.Fprintln(w, "# plans, buffers and each statement's share of a system's time are what this is for.")
	fmt.Fprintln(w, "# rows: the top plan node's actual rows, summed over the calls (the jobs a claim or a")
	fmt.Fprintln(w, "# completion answered, for the statements that answer their jobs); for an INSERT, UPDATE")
	fmt.Fprintln(w, "# or DELETE that returns nothing, the rows its plan fed it.")
	if l.garbled > 0 {
		fmt.Fprintf(w, "# %d notices were not plans and were left out\n", l.garbled)
	}
	for _, sys := range l.systems {
		type entry struct {
			query string
			s     *stmtPlans
			total float64
		}
		var es []entry
		var all float64
		for k, s := range l.stmts {
			if k.system != sys {
				continue
			}
			var t float64
			for _, d := range s.took {
				t += ms(d)
			}
			es = append(es, entry{k.query, s, t})
			all += t
		}
		slices.SortFunc(es, func(a, b entry) int {
			if a.total != b.total {
				if a.total > b.total {
					return -1
				}
				return 1
			}
			return strings.Compare(a.query, b.query)
		})
		fmt.Fprintf(w, "\n\n######## %s: %d statements, %.0f ms in PostgreSQL's executor\n", sys, len(es), all)
		for _, e := range es {
			s := e.s
			perRow := ""
			if s.rows > s.calls { // a statement of many rows a call: a claim, a batch
				perRow = fmt.Sprintf(", %.1f µs a row", e.total*1000/float64(s.rows))
			}
			fmt.Fprintf(w, "\n==== %s: %.1f%% of its time, %d calls, %.0f ms, %d rows%s; a call p50 %.3f ms, p99 %.3f, max %.3f\n",
				sys, pct(e.total, all), s.calls, e.total, s.rows, perRow,
				ms(percentile(s.took, 50)), ms(percentile(s.took, 99)), ms(percentile(s.took, 100)))
			fmt.Fprintf(w, "%s\n", indent(shorten(e.query, 12), "  | "))
			if pct(e.total, all) < 1 || s.slowest.plan == "" {
				continue
			}
			med := medianSample(s.sample)
			fmt.Fprintf(w, "-- a call near the median (%.3f ms):\n%s", med.ms, withNewline(med.plan))
			if s.calls > 1 {
				fmt.Fprintf(w, "-- the slowest call (%.3f ms):\n%s", s.slowest.ms, withNewline(s.slowest.plan))
			}
		}
	}
	return w.Flush()
}

func pct(part, whole float64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * part / whole
}

// medianSample is the sample whose duration is the median of the samples'.
func medianSample(ps []planSample) planSample {
	s := slices.Clone(ps)
	slices.SortFunc(s, func(a, b planSample) int {
		switch {
		case a.ms < b.ms:
			return -1
		case a.ms > b.ms:
			return 1
		}
		return 0
	})
	return s[(len(s)-1)/2]
}

// shorten keeps the first n lines of q.
func shorten(q string, n int) string {
	lines := strings.Split(q, "\n")
	if len(lines) <= n {
		return q
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n… (%d more lines)", len(lines)-n)
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

func withNewline(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}
