package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
)

// Config says how to run the harness.
type Config struct {
	Short  bool   // the CI profile (about a minute) instead of the full one
	Jobs   int    // jobs to enqueue; 0: the profile's
	Seed   int64  // fault schedule seed; 0: from the clock
	Driver string // "postgres" (default) or "sqlite"
	// Exec starts a child process: the executable and its arguments. The child
	// finds its configuration in EnvChild and must call RunChild.
	Exec []string
	Env  []string // extra environment for children
	// Progress receives a line per phase; nil discards.
	Progress io.Writer
	// Keep leaves the work directory (database, logs) in place for inspection.
	Keep bool
}

// profile sizes a run.
type profile struct {
	name                                   string
	jobs                                   int
	rate                                   float64 // enqueues per second while faults run
	baseline, killEvery, skewPhase         time.Duration
	kills, dbRestarts, terminates, pauses  int
	leaderKills                            int
	libWorkers, skewWorkers, remoteWorkers int
	concurrency                            int
	lease, leaderTTL, drain                time.Duration
}

func profileFor(short bool, drv string) profile {
	p := profile{name: "full", jobs: 35000, rate: 170, baseline: 20 * time.Second, killEvery: 3 * time.Second,
		skewPhase: 10 * time.Second, kills: 20, dbRestarts: 2, terminates: 6, pauses: 5, leaderKills: 5,
		libWorkers: 3, skewWorkers: 2, remoteWorkers: 2, concurrency: 8,
		lease: 3 * time.Second, leaderTTL: 3 * time.Second, drain: 2 * time.Minute}
	if short {
		p = profile{name: "short", jobs: 3000, rate: 90, baseline: 3 * time.Second, killEvery: 2 * time.Second,
			skewPhase: 3 * time.Second, kills: 4, dbRestarts: 1, terminates: 3, pauses: 1, leaderKills: 2,
			libWorkers: 2, skewWorkers: 1, remoteWorkers: 2, concurrency: 8,
			lease: 2 * time.Second, leaderTTL: 2 * time.Second, drain: 45 * time.Second}
	}
	if drv == "sqlite" {
		// One process holds the file: only kill and restart apply.
		p.libWorkers, p.skewWorkers, p.remoteWorkers = 1, 0, 0
		p.dbRestarts, p.terminates, p.pauses, p.leaderKills = 0, 0, 0, 0
		p.jobs, p.rate = p.jobs/3, p.rate/2
		if short {
			p.jobs = 600
		}
	}
	return p
}

type harness struct {
	cfg  Config
	prof profile
	rng  *rand.Rand
	rmu  sync.Mutex
	prog io.Writer
	work string

	pg     *postgres
	dbURL  string // without application_name
	drv    driver.Driver
	client *drover.Client
	pool   *pgxpool.Pool // PostgreSQL admin pool (terminate, checks)
	sqlDB  *sql.DB       // the checker's view, both drivers

	lines      *lineLog
	mu         sync.Mutex
	procs      map[string]*proc // slot → current incarnation
	generation map[string]int
	faults     []fault
	killedAt   map[string]time.Time // incarnation → SIGKILL time
	pausesDone []pauseRecord

	serverAddr string
	serverURL  string

	led      ledger
	probes   probeSet
	cancels  cancelSet
	leaders  leaderWatch
	summary  Summary
	problems []string
}

type pauseRecord struct {
	id             string
	start, resumed time.Time
	rejected       int
}

// Run runs the harness and returns its summary; err is set when the harness
// itself could not run (the checks' results are in the summary).
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if cfg.Driver == "" {
		cfg.Driver = "postgres"
	}
	if cfg.Driver != "postgres" && cfg.Driver != "sqlite" {
		return nil, driver.Invalid("driver", "%q: use postgres or sqlite", cfg.Driver)
	}
	if len(cfg.Exec) == 0 {
		return nil, errors.New("chaos: Config.Exec is empty: the harness needs a way to start its worker processes")
	}
	if errNoStop != nil {
		return nil, errNoStop
	}
	h := &harness{cfg: cfg, prof: profileFor(cfg.Short, cfg.Driver), prog: cfg.Progress,
		lines: newLineLog(), procs: map[string]*proc{}, generation: map[string]int{}, killedAt: map[string]time.Time{}}
	if cfg.Jobs > 0 {
		h.prof.jobs = cfg.Jobs
	}
	if h.prog == nil {
		h.prog = io.Discard
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	h.rng = rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	h.summary = Summary{Driver: cfg.Driver, Profile: h.prof.name, Seed: seed}
	began := time.Now()
	err := h.run(ctx)
	h.summary.Elapsed = time.Since(began)
	h.summary.Problems = append(h.summary.Problems, h.problems...)
	return &h.summary, err
}

func (h *harness) logf(format string, a ...any) {
	fmt.Fprintf(h.prog, "chaos %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

func (h *harness) problem(format string, a ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.problems) < 50 {
		h.problems = append(h.problems, fmt.Sprintf(format, a...))
	}
}

func (h *harness) intn(n int) int {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	return h.rng.IntN(n)
}

func (h *harness) run(ctx context.Context) (err error) {
	h.work, err = os.MkdirTemp("", "drover-chaos-")
	if err != nil {
		return err
	}
	h.logf("profile %s, driver %s, seed %d, %d jobs; work dir %s", h.prof.name, h.cfg.Driver, h.summary.Seed, h.prof.jobs, h.work)
	defer h.cleanup()
	if err := h.setup(ctx); err != nil {
		return err
	}
	if err := h.startAll(ctx); err != nil {
		return err
	}
	return h.phases(ctx)
}

// cleanup stops every process and the database and deletes the work directory,
// whatever happened before.
func (h *harness) cleanup() {
	h.mu.Lock()
	procs := make([]*proc, 0, len(h.procs))
	for _, p := range h.procs {
		procs = append(procs, p)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(5 * time.Second) }()
	}
	wg.Wait()
	if h.client != nil {
		_ = h.drv.Close()
	}
	if h.sqlDB != nil && h.pool != nil {
		_ = h.sqlDB.Close()
	}
	if h.pool != nil {
		h.pool.Close()
	}
	if h.pg != nil {
		h.pg.stop()
	}
	if h.cfg.Keep {
		h.logf("kept %s", h.work)
		return
	}
	_ = os.RemoveAll(h.work)
}

func (h *harness) setup(ctx context.Context) error {
	if h.cfg.Driver == "sqlite" {
		h.dbURL = filepath.Join(h.work, "chaos.db")
		drv, err := drover.Open(ctx, h.dbURL, nil)
		if err != nil {
			return err
		}
		h.drv = drv
		if err := drv.MigrateUp(ctx); err != nil {
			return err
		}
		h.sqlDB = drv.(interface{ DB() *sql.DB }).DB()
		if _, err := h.sqlDB.ExecContext(ctx, `CREATE TABLE chaos_effects (id INTEGER PRIMARY KEY, seq INTEGER NOT NULL,
job_id INTEGER NOT NULL, attempt INTEGER NOT NULL, worker_id TEXT NOT NULL, lease_token TEXT, held INTEGER NOT NULL,
at INTEGER NOT NULL, worker_at INTEGER)`); err != nil {
			return err
		}
		h.client, err = drover.NewClient(drv, nil)
		return err
	}
	pg, url, err := startPostgres(ctx, h.work)
	if err != nil {
		return err
	}
	h.pg, h.dbURL = pg, url
	h.logf("PostgreSQL on 127.0.0.1:%d (%s)", pg.port, pg.dir)
	pcfg, err := pgxpool.ParseConfig(url + "&application_name=chaos-harness")
	if err != nil {
		return err
	}
	pcfg.MaxConns = 16
	if h.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return err
	}
	h.sqlDB = stdlib.OpenDBFromPool(h.pool)
	drv, err := drover.Open(ctx, url+"&application_name=chaos-enqueuer", nil)
	if err != nil {
		return err
	}
	h.drv = drv
	if err := drv.MigrateUp(ctx); err != nil { // what `drover migrate up` does
		return err
	}
	if _, err := h.pool.Exec(ctx, `CREATE TABLE chaos_effects (id bigserial PRIMARY KEY, seq bigint NOT NULL,
job_id bigint NOT NULL, attempt int NOT NULL, worker_id text NOT NULL, lease_token text, held boolean NOT NULL,
at timestamptz NOT NULL DEFAULT clock_timestamp(), worker_at timestamptz)`); err != nil {
		return err
	}
	h.client, err = drover.NewClient(drv, nil)
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	h.serverAddr = fmt.Sprintf("127.0.0.1:%d", port)
	h.serverURL = "http://" + h.serverAddr
	return nil
}

// slots lists the worker slots (not the server) in a stable order.
func (h *harness) workerSlots() []string {
	var s []string
	for i := 0; i < h.prof.libWorkers; i++ {
		s = append(s, fmt.Sprintf("lib-%d", i))
	}
	for i := 0; i < h.prof.skewWorkers; i++ {
		s = append(s, fmt.Sprintf("skew-%d", i))
	}
	for i := 0; i < h.prof.remoteWorkers; i++ {
		s = append(s, fmt.Sprintf("rem-%d", i))
	}
	return s
}

func (h *harness) startAll(ctx context.Context) error {
	if h.cfg.Driver == "postgres" {
		if _, err := h.startSlot(ctx, "server"); err != nil {
			return err
		}
	}
	for _, s := range h.workerSlots() {
		if strings.HasPrefix(s, "skew-") {
			continue // phase 5 starts them
		}
		if _, err := h.startSlot(ctx, s); err != nil {
			return err
		}
	}
	h.leaders.start(h)
	return nil
}

// startSlot starts the next incarnation of slot and waits for its ready line.
func (h *harness) startSlot(ctx context.Context, slot string) (*proc, error) {
	h.mu.Lock()
	h.generation[slot]++
	id := fmt.Sprintf("%s.%d", slot, h.generation[slot])
	h.mu.Unlock()
	cfg := childConfig{ID: id, DatabaseURL: h.dbURL, Lease: h.prof.lease, LeaderTTL: h.prof.leaderTTL, Concurrency: h.prof.concurrency}
	if h.pg != nil {
		cfg.DatabaseURL = h.dbURL + "&application_name=chaos-" + id
	}
	switch {
	case slot == "server":
		cfg.Mode, cfg.Addr = modeServer, h.serverAddr
	case strings.HasPrefix(slot, "rem-"):
		cfg.Mode, cfg.ServerURL = modeRemote, h.serverURL
	default:
		cfg.Mode = modeWorker
	}
	if strings.HasPrefix(slot, "skew-") {
		cfg.Skew = 30 * time.Second
		if slot == "skew-1" {
			cfg.Skew = -30 * time.Second
		}
	}
	cursor := h.lines.len()
	p, err := startProc(h.cfg.Exec, h.cfg.Env, cfg, h.lines, filepath.Join(h.work, slot+".log"))
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.procs[slot] = p
	h.mu.Unlock()
	var fatal string
	ok := h.lines.await(&cursor, 60*time.Second, func(l line) bool {
		if l.Proc != id || len(l.Fields) == 0 {
			return false
		}
		switch l.Fields[0] {
		case "ready":
			return true
		case "fatal", "exited":
			fatal = strings.Join(l.Fields, " ")
			return true
		}
		return false
	})
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case !ok:
		return nil, fmt.Errorf("%s did not start within 60s; see %s", id, filepath.Join(h.work, slot+".log"))
	case fatal != "":
		return nil, fmt.Errorf("%s: %s\n%s", id, fatal, tail(filepath.Join(h.work, slot+".log"), 2000))
	}
	return p, nil
}

func (h *harness) proc(slot string) *proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.procs[slot]
}

func (h *harness) addFault(f fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, f)
}

// remoteIDs lists the current remote worker incarnations: a fault of the
// server cuts them off too.
func (h *harness) remoteIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []string
	for slot, p := range h.procs {
		if strings.HasPrefix(slot, "rem-") {
			ids = append(ids, p.id)
		}
	}
	sort.Strings(ids)
	return ids
}

// killSlot SIGKILLs the slot's process, records the fault and starts the next incarnation.
func (h *harness) killSlot(ctx context.Context, slot, kind string) error {
	p := h.proc(slot)
	if p == nil {
		return fmt.Errorf("no process in slot %s", slot)
	}
	targets := []string{p.id}
	if slot == "server" {
		targets = append(targets, h.remoteIDs()...)
	}
	at := time.Now()
	p.kill()
	h.mu.Lock()
	h.killedAt[p.id] = at
	h.mu.Unlock()
	_, err := h.startSlot(ctx, slot)
	h.addFault(fault{Kind: kind, Targets: targets, Start: at, End: time.Now()})
	h.summary.WorkerKills++
	return err
}

// statsOfProc asks a process for its counters and waits for the answer.
func (h *harness) statsOfProc(p *proc, timeout time.Duration) (map[string]int64, bool) {
	cursor := h.lines.len()
	p.send("stats")
	var got map[string]int64
	ok := h.lines.await(&cursor, timeout, func(l line) bool {
		if l.Proc == p.id && len(l.Fields) > 0 && l.Fields[0] == "stats" {
			got = statsOf(l.Fields)
			return true
		}
		return false
	})
	return got, ok
}

func (l *lineLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}
