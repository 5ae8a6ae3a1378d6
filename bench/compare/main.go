// Command compare runs the same workloads against Drover, River and a raw
// baseline on one PostgreSQL database (and, with --sqlite, Drover and a raw
// baseline on SQLite), one after the other, and prints one table. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

var allWorkloads = []string{"burn-down", "continuous", "latency", "backlog"}

// droverMinPollMS is the shortest WorkerConfig.PollInterval Drover takes (its
// documented bound, 10ms; not exported).
const droverMinPollMS = 10

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// run runs the harness with the command line args (without the program's
// name). Every flag is checked before anything is opened or written.
func run(args []string) (runErr error) {
	fl := flag.NewFlagSet("compare", flag.ContinueOnError)
	var (
		dbURL       = fl.String("database-url", "postgres://postgres@127.0.0.1:5432/drover_bench?sslmode=disable", "PostgreSQL database for every run (created if missing); each system gets its own schema")
		workloadsF  = fl.String("workloads", strings.Join(allWorkloads, ","), "comma list of workloads: "+strings.Join(allWorkloads, ","))
		systemsF    = fl.String("system", "drover,river,raw", "comma list of systems: drover, river, raw")
		jobs        = fl.Int64("jobs", 1_000_000, "burn-down: jobs inserted, then worked")
		contDur     = fl.Duration("continuous", 60*time.Second, "continuous: measurement window")
		maxPending  = fl.Int64("max-pending", 50_000, "continuous: the enqueuer keeps at most this many jobs not yet completed")
		latRate     = fl.Int("latency-rate", 1000, "latency: jobs offered per second (one insert each)")
		latDur      = fl.Duration("latency-duration", 30*time.Second, "latency: how long the rate is offered")
		backlogF    = fl.String("backlog", "10000,1000000,5000000", "backlog: table sizes (rows), each in a table of its own, measured in turn")
		backlogJobs = fl.Int("backlog-jobs", 1000, "backlog: jobs measured per size, run one at a time in blocks of 100")
		backlogFut  = fl.Float64("backlog-future", 0.1, "backlog: fraction of seeded rows waiting far in the future (the rest finished)")
		burnRounds  = fl.Int("burn-down-rounds", 1, "burn-down: run every system this many times, each round in the reverse order of the one before, and report each one's median (and each round's figures and quotients)")
		sqlite      = fl.Bool("sqlite", false, "also run drover and raw on SQLite (burn-down and continuous); raw runs as raw-sqlite and raw-sqlite-row (raw on Drover's job row)")
		sqliteOnly  = fl.Bool("sqlite-only", false, "run only the SQLite systems (implies --sqlite); PostgreSQL is not contacted")
		sqliteDir   = fl.String("sqlite-dir", "", "directory for the SQLite files (default: a new temporary directory)")
		riverSQLite = fl.Bool("river-sqlite", false, "also run River on SQLite (its riversqlite driver, River's knobs) in burn-down and continuous, beside the other SQLite systems (implies --sqlite); slow: ~2k jobs/s on the 2-core machine")
		// The knobs' defaults are the README table's: as many handler slots as
		// River's MaxWorkers (riverbench's 2000), so a run without flags
		// compares the two at the same concurrency.
		conc        = fl.Int("concurrency", 2000, "drover and raw: jobs run at once (handler goroutines); the default matches --river-max-workers")
		claimBatch  = fl.Int("claim-batch", 1000, "drover and raw: most jobs one claim takes, bounded by the free slots (0: Drover's default, 100; raw then uses the same)")
		compBatch   = fl.Int("completion-batch", 500, "drover and raw: most completions per statement (0: Drover's default; raw then uses 100)")
		pollMS      = fl.Int("poll-interval-ms", 0, "drover: fallback poll interval in ms (0: Drover's default)")
		insertBatch = fl.Int("insert-batch", 1000, "jobs per insert statement in burn-down and continuous (every system)")
		insertWork  = fl.Int("insert-workers", 1, "goroutines inserting batches concurrently in burn-down and continuous")
		maxConns    = fl.Int("max-conns", 0, "connection pool size of every system (0: pgx's default, max(4, CPUs))")
		riverMaxW   = fl.Int("river-max-workers", 2000, "river: MaxWorkers of the default queue (riverbench: 2000)")
		riverCool   = fl.Duration("river-fetch-cooldown", 2*time.Millisecond, "river: FetchCooldown (riverbench: 2ms; River's default 100ms)")
		riverPoll   = fl.Duration("river-fetch-poll-interval", 20*time.Millisecond, "river: FetchPollInterval (riverbench: 20ms; River's default 1s)")
		riverFast   = fl.Bool("river-insert-fast", true, "river: insert batches with InsertManyFast (COPY), River's fastest insert; false: InsertMany, as riverbench does")
		stall       = fl.Duration("stall-timeout", 60*time.Second, "give up on a run when no job completed for this long")
		output      = fl.String("o", "table", "output: table or json")
		cpuProfile  = fl.String("cpuprofile", "", "write this process's CPU profile (pprof) for the whole run to this file")
		tableFrom   = fl.String("table-from", "", "print the table of a report saved with -o json from this file, and run nothing")
		latCSV      = fl.String("latency-csv", "", "latency: write one row a job (system, seq, due_ms, late_ms, start_ms, finish_ms, enqueued_unix_ns) to this CSV file, to see when the slow jobs came")
		explainF    = fl.String("explain", "", "write the plan of every statement each PostgreSQL system runs (EXPLAIN (ANALYZE, BUFFERS), sent by auto_explain; needs a superuser), each statement's calls and share of the system's time, to this file; timing every plan node slows every statement, so the run's figures are not for comparison and its targets are not judged")
		memProfile  = fl.String("memprofile", "", "write this process's heap profile (pprof; alloc_space and alloc_objects cover the whole run) to this file at the end")
	)
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every setting is a flag (-h lists them)", fl.Arg(0))
	}
	if *output != "table" && *output != "json" {
		return fmt.Errorf("-o must be table or json, got %q", *output)
	}
	if *tableFrom != "" {
		// It prints a table: -o json asked for what the saved file already is.
		if *output == "json" {
			return fmt.Errorf("--table-from prints the table of %s, which is the JSON; -o json asks for JSON", *tableFrom)
		}
		if err := printSaved(*tableFrom, os.Stdout); err != nil {
			return fmt.Errorf("--table-from: %w", err)
		}
		return nil
	}
	wl, err := pickList(*workloadsF, allWorkloads, "workload", "--workloads")
	if err != nil {
		return err
	}
	sysNames, err := pickList(*systemsF, []string{"drover", "river", "raw"}, "system", "--system")
	if err != nil {
		return err
	}
	var sizes []int64
	for _, f := range strings.Split(*backlogF, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || n < 2 {
			return fmt.Errorf("--backlog: %q is not a size of at least 2", f)
		}
		if slices.Contains(sizes, n) {
			return fmt.Errorf("--backlog: %d is given twice (each size is a table of its own)", n)
		}
		sizes = append(sizes, n)
	}
	if *burnRounds < 1 {
		return fmt.Errorf("--burn-down-rounds must be at least 1, got %d", *burnRounds)
	}
	for _, n := range []struct {
		flag string
		v    int64
	}{{"--jobs", *jobs}, {"--insert-batch", int64(*insertBatch)}, {"--concurrency", int64(*conc)},
		{"--latency-rate", int64(*latRate)}, {"--backlog-jobs", int64(*backlogJobs)},
		{"--insert-workers", int64(*insertWork)}, {"--river-max-workers", int64(*riverMaxW)}} {
		if n.v < 1 {
			return fmt.Errorf("%s must be at least 1, got %d", n.flag, n.v)
		}
	}
	if *maxPending < int64(*insertBatch) {
		return fmt.Errorf("--max-pending must be at least --insert-batch (%d), got %d", *insertBatch, *maxPending)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--continuous", *contDur}, {"--latency-duration", *latDur}, {"--stall-timeout", *stall},
		{"--river-fetch-cooldown", *riverCool}, {"--river-fetch-poll-interval", *riverPoll}} {
		if d.v <= 0 {
			return fmt.Errorf("%s must be positive, got %s", d.flag, d.v)
		}
	}
	// The latency workload offers rate × duration jobs, rounded down: fewer
	// than one offered none, and its line read met on the p50 and p99 of no job.
	if contains(wl, "latency") && float64(*latRate)*latDur.Seconds() < 1 {
		return fmt.Errorf("--latency-duration %s at --latency-rate %d/s offers no job; offer at least one (rate × duration ≥ 1)", *latDur, *latRate)
	}
	if !(*backlogFut >= 0 && *backlogFut <= 1) { // NaN too
		return fmt.Errorf("--backlog-future must be a fraction from 0 to 1, got %v", *backlogFut)
	}
	for _, n := range []struct {
		flag, zero string // zero: whose default 0 asks for
		v          int
	}{{"--max-conns", "pgx's", *maxConns}, {"--poll-interval-ms", "Drover's", *pollMS},
		{"--claim-batch", "Drover's", *claimBatch}, {"--completion-batch", "Drover's", *compBatch}} {
		if n.v < 0 {
			return fmt.Errorf("%s must not be negative (0: %s default), got %d", n.flag, n.zero, n.v)
		}
	}
	// The systems' own upper bounds, checked now: a system refused them only
	// when it started, after the systems before it had run.
	for _, n := range []struct {
		flag, whose string
		v, max      int
	}{{"--concurrency", "Drover's handler slots", *conc, drover.MaxConcurrency},
		{"--completion-batch", "Drover's", *compBatch, drover.MaxCompletionBatch},
		{"--river-max-workers", "River's MaxWorkers", *riverMaxW, river.QueueNumWorkersMax}} {
		if n.v > n.max {
			return fmt.Errorf("%s must be at most %d (%s bound), got %d", n.flag, n.max, n.whose, n.v)
		}
	}
	// And their lower bounds: Drover's poll interval (WorkerConfig: at least
	// 10ms) and River's fetch settings (at least 1ms, the poll no shorter than
	// the cooldown) were refused only by the system's start, so the run went
	// on with the others and showed that system's runs as ERROR.
	if *pollMS > 0 && *pollMS < droverMinPollMS {
		return fmt.Errorf("--poll-interval-ms must be 0 (Drover's default) or at least %d (Drover's bound), got %d", droverMinPollMS, *pollMS)
	}
	if *pollMS > math.MaxInt64/int(time.Millisecond) {
		return fmt.Errorf("--poll-interval-ms must be at most %d, got %d", math.MaxInt64/int(time.Millisecond), *pollMS)
	}
	for _, d := range []struct {
		flag   string
		v, min time.Duration
	}{{"--river-fetch-cooldown", *riverCool, river.FetchCooldownMin}, {"--river-fetch-poll-interval", *riverPoll, river.FetchPollIntervalMin}} {
		if d.v < d.min {
			return fmt.Errorf("%s must be at least %s (River's bound), got %s", d.flag, d.min, d.v)
		}
	}
	if *riverPoll < *riverCool {
		return fmt.Errorf("--river-fetch-poll-interval must be at least --river-fetch-cooldown (%s, River's bound), got %s", *riverCool, *riverPoll)
	}
	if *riverSQLite && !contains(sysNames, "river") {
		return fmt.Errorf("--river-sqlite runs River on SQLite, and --system %s leaves river out", strings.Join(sysNames, ","))
	}
	if *sqliteOnly {
		// The SQLite systems are Drover's and raw's (and River's with
		// --river-sqlite), and run burn-down and continuous only: say so rather
		// than print an empty table.
		if !contains(wl, "burn-down") && !contains(wl, "continuous") {
			return fmt.Errorf("--sqlite-only runs burn-down and continuous only, and --workloads %s has neither", strings.Join(wl, ","))
		}

		if !contains(sysNames, "drover") && !contains(sysNames, "raw") && !*riverSQLite {
			return fmt.Errorf("--sqlite-only runs drover and raw only (and river with --river-sqlite), and --system %s has neither", strings.Join(sysNames, ","))
		}
		if *explainF != "" {
			return errors.New("--explain explains PostgreSQL's statements, and --sqlite-only contacts no PostgreSQL")
		}
	}
	if !*sqliteOnly && !contains(wl, "burn-down") && !contains(wl, "continuous") &&
		!contains(sysNames, "drover") && !contains(sysNames, "river") {
		// Raw has no queue logic: nothing wakes its claims and it has no
		// claim to time, so it runs neither latency nor backlog.
		return fmt.Errorf("--system %s runs burn-down and continuous only, and --workloads %s has neither (latency and backlog run on drover and river)",
			strings.Join(sysNames, ","), strings.Join(wl, ","))
	}
	if *sqliteDir != "" {
		if fi, err := os.Stat(*sqliteDir); err != nil {
			return fmt.Errorf("--sqlite-dir: %w", err)
		} else if !fi.IsDir() {
			return fmt.Errorf("--sqlite-dir: %s is not a directory", *sqliteDir)
		}
	}
	if *memProfile != "" {
		// Created now, so a path that cannot be written is refused before the
		// run; written at its end, and a failed write fails the run.
		f, err := os.Create(*memProfile)
		if err != nil {
			return fmt.Errorf("--memprofile: %w", err)
		}
		defer func() {
			err := pprof.Lookup("allocs").WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil && runErr == nil {
				runErr = fmt.Errorf("--memprofile: %w", err)
			}
		}()
	}
	// An io.Writer, not an *os.File: a nil *os.File in the interface is not a
	// nil interface, and the latency workload wrote to it and failed every run
	// made without the flag.
	var latencyCSV io.Writer
	if *latCSV != "" {
		if !contains(wl, "latency") {
			return fmt.Errorf("--latency-csv is written by the latency workload, and --workloads %s leaves it out", strings.Join(wl, ","))
		}
		f, err := os.Create(*latCSV)
		if err != nil {
			return fmt.Errorf("--latency-csv: %w", err)
		}
		defer f.Close()
		if _, err := io.WriteString(f, latencyCSVHeader); err != nil {
			return fmt.Errorf("--latency-csv: %w", err)
		}
		latencyCSV = f
	}
	var ex *explainLog
	if *explainF != "" {
		f, err := os.Create(*explainF)
		if err != nil {
			return fmt.Errorf("--explain: %w", err)
		}
		ex = newExplainLog()
		defer func() {
			// What was explained is written even when the run failed: it
			// may be what says why.
			werr := ex.write(f)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				fmt.Fprintln(os.Stderr, "compare: --explain:", werr)
			}
		}()
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	o := opts{
		jobs: *jobs, insertBatch: *insertBatch, insertWorkers: *insertWork, continuous: *contDur, maxPending: *maxPending,
		latencyRate: *latRate, latencyDuration: *latDur, backlog: sizes, backlogJobs: *backlogJobs,
		backlogFuture: *backlogFut, stall: *stall, latencyCSV: latencyCSV,
	}
	k := knobs{concurrency: *conc, claimBatch: *claimBatch, completionBatch: *compBatch, pollInterval: *pollMS}
	rk := riverKnobs{maxWorkers: *riverMaxW, fetchCooldown: *riverCool, fetchPoll: *riverPoll, insertFast: *riverFast}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()

	var systems []system
	var admin *pgxpool.Pool
	var poolMax int32
	if *riverSQLite {
		*sqlite = true
	}
	if *sqliteOnly {
		*sqlite = true
	} else {
		var unlock func()
		var err error
		admin, poolMax, unlock, err = openPG(ctx, *dbURL, *maxConns)
		if err != nil {
			return err
		}
		defer admin.Close()
		defer unlock()
		for _, n := range sysNames {
			switch n {
			case "drover":
				systems = append(systems, newDroverPG(admin, *dbURL, *maxConns, ex, k))
			case "river":
				systems = append(systems, newRiver(admin, *dbURL, *maxConns, ex, rk))
			case "raw":
				systems = append(systems, newRawPG(admin, *dbURL, *maxConns, ex, k))
			}
		}
	}
	var sqliteSystems []system
	if *sqlite {
		dir := *sqliteDir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "drover-compare-"); err != nil {
				return err
			}
			defer os.RemoveAll(dir)
		}
		if contains(sysNames, "drover") {
			sqliteSystems = append(sqliteSystems, newDroverSQLite(dir, k))
		}
		if *riverSQLite {
			sqliteSystems = append(sqliteSystems, newRiverSQLite(dir, rk))
		}
		if contains(sysNames, "raw") {
			sqliteSystems = append(sqliteSystems, newRawSQLite(dir, k), newRawSQLiteRow(dir, k))
		}
	}
	defer func() {
		for _, s := range append(systems, sqliteSystems...) {
			s.close()
		}
	}()

	// After a burn-down's insert and before its work (untimed), the tables'
	// statistics are brought up to date, as autoanalyze would have in
	// production: prepare's VACUUM ANALYZE ran on empty tables, and a system
	// whose plans read statistics (River's) was measured on stale ones.
	o.analyze = func() error {
		if admin == nil {
			return nil
		}
		_, err := admin.Exec(ctx, "ANALYZE")
		return err
	}
	settleFn := func() error {
		if admin == nil {
			return nil // --sqlite-only: no PostgreSQL to settle
		}
		return settle(ctx, admin)
	}
	// prepare gives a run an empty database: every system's schema is dropped,
	// the one about to run is recreated and migrated, then VACUUM ANALYZE and a
	// CHECKPOINT.
	prepare := func(s system) error {
		for _, o := range append(systems, sqliteSystems...) {
			if o != s {
				if err := o.wipe(ctx); err != nil {
					return fmt.Errorf("%s: wipe: %w", o.name(), err)
				}
			}
		}
		if err := s.reset(ctx); err != nil {
			return fmt.Errorf("%s: reset: %w", s.name(), err)
		}
		return settleFn()
	}

	mach := describeBuild(ctx)
	if admin != nil {
		mach = describeMachine(ctx, admin, poolMax)
	}
	rep := report{Started: time.Now().UTC().Format(time.RFC3339), Machine: mach, Settings: describeSettings(o, k, rk, wl)}
	rep.Settings["burn_down_rounds"] = fmt.Sprint(*burnRounds)
	if ex != nil {
		rep.Settings["explain"] = *explainF
	}
	// An interrupt (Ctrl-C) stops the run: the workload it cut short is left
	// out of the report, whose jobs it cut off would otherwise count as lost,
	// and the report of the workloads before it is printed.
	interrupted := ""
workloads:
	for _, w := range wl {
		runOn := systems
		if w == "burn-down" || w == "continuous" {
			runOn = append(append([]system(nil), systems...), sqliteSystems...)
		}
		if w == "burn-down" && *burnRounds > 1 {
			runOn = burnDownSchedule(runOn, *burnRounds)
		}
		from := len(rep.Results)
		cut := func() { interrupted, rep.Results = w, rep.Results[:from] }
		for _, s := range runOn {
			if ctx.Err() != nil {
				cut()
				break workloads
			}
			if (w == "latency" || w == "backlog") && s.name() == "raw" {
				continue // no queue logic: nothing to wake a claim, nothing to measure
			}
			logf("%s on %s", w, s.name())
			if err := prepare(s); err != nil {
				if ctx.Err() != nil {
					cut()
					break workloads
				}
				return err
			}
			switch w {
			case "burn-down":
				rep.Results = append(rep.Results, burnDown(ctx, s, o))
			case "continuous":
				rep.Results = append(rep.Results, continuous(ctx, s, o))
			case "latency":
				rep.Results = append(rep.Results, latency(ctx, s, o))
			case "backlog":
				rep.Results = append(rep.Results, backlog(ctx, s, o, settleFn)...)
			}
			if ctx.Err() != nil {
				cut()
				break workloads
			}
			if r := rep.Results[len(rep.Results)-1]; r.Error != "" {
				logf("%s on %s: %s", w, s.name(), r.Error)
			}
		}
		if w == "burn-down" && *burnRounds > 1 {
			rep.Results = append(rep.Results[:from], mergeRounds(rep.Results[from:])...)
		}
	}
	if interrupted != "" {
		cancel() // a second Ctrl-C ends the process
		if len(rep.Results) == 0 {
			return fmt.Errorf("interrupted during %s, the first workload: no report", interrupted)
		}
	}
	if *output == "json" {
		if err := rep.writeJSON(os.Stdout); err != nil {
			return err
		}
	} else {
		rep.writeTable(os.Stdout)
	}
	if interrupted != "" {
		return fmt.Errorf("interrupted during %s: it is left out of the report, which shows the workloads before it", interrupted)
	}
	return rep.failed()
}

// openPG checks dbURL, creates its database if needed and takes the run lock; it
// returns the admin pool, the pool size every system gets and the unlock.
func openPG(ctx context.Context, dbURL string, maxConns int) (*pgxpool.Pool, int32, func(), error) {
	if u, err := url.Parse(dbURL); err != nil {
		return nil, 0, nil, fmt.Errorf("--database-url: %w", err)
	} else if db := strings.TrimPrefix(u.Path, "/"); db == "postgres" || db == "test" || db == "" {
		return nil, 0, nil, fmt.Errorf("--database-url: refusing to benchmark in database %q; use a database of its own (e.g. drover_bench)", db)
	}
	if err := ensureDatabase(ctx, dbURL); err != nil {
		return nil, 0, nil, err
	}
	admin, err := newPool(ctx, dbURL, "public", 3, nil, "")
	if err != nil {
		return nil, 0, nil, err
	}
	// One run at a time per database: a second run would drop this run's
	// schemas and work its jobs (and both would measure a shared CPU).
	lock, err := admin.Acquire(ctx)
	if err != nil {
		admin.Close()
		return nil, 0, nil, err
	}
	var locked bool
	if err := lock.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtext('drover bench/compare'))").Scan(&locked); err != nil {
		lock.Release()
		admin.Close()
		return nil, 0, nil, err
	}
	if !locked {
		lock.Release()
		admin.Close()
		return nil, 0, nil, fmt.Errorf("another bench/compare run is using %s; wait for it (or use another --database-url)", redactURL(dbURL))
	}
	unlock := func() {
		lock.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext('drover bench/compare'))")
		lock.Release()
	}
	probe, err := newPool(ctx, dbURL, "public", maxConns, nil, "")
	if err != nil {
		unlock()
		admin.Close()
		return nil, 0, nil, err
	}
	poolMax := probe.Config().MaxConns
	probe.Close()
	return admin, poolMax, unlock, nil
}

func pickList(s string, known []string, what, flag string) ([]string, error) {
	var out []string
	all := false
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if f == "all" {
			// Every name after it is still checked: "all,bogus" is a typo.
			all = true
			continue
		}
		if !contains(known, f) {
			return nil, fmt.Errorf("%s: unknown %s %q (known: %s)", flag, what, f, strings.Join(known, ", "))
		}
		if contains(out, f) {
			return nil, fmt.Errorf("%s: %s %q is given twice", flag, what, f)
		}
		out = append(out, f)
	}
	if all {
		return known, nil
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no %s chosen", flag, what)
	}
	// Keep the canonical order.
	var ordered []string
	for _, k := range known {
		if contains(out, k) {
			ordered = append(ordered, k)
		}
	}
	return ordered, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
