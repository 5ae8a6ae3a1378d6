package chaos

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/server"
)

// EnvChild carries a child's configuration (JSON) from the harness to the process
// it starts; a process that finds it set runs RunChild instead of its usual main.
const EnvChild = "DROVER_CHAOS_CHILD"

// The kinds the children handle. KindNoHandler is registered nowhere: jobs of it
// must fail under their retry policy.
const (
	KindWork      = "chaos.work"  // records a side effect, sleeps ms, returns {"seq": n}
	KindPanic     = "chaos.panic" // always panics
	KindHang      = "chaos.hang"  // never returns, even when its context ends
	KindNoHandler = "chaos.nohandler"
)

// Child modes.
const (
	modeWorker = "worker" // library worker (and engine) on the database
	modeRemote = "remote" // remote worker through the server; opens the database only for the effect log
	modeServer = "server" // HTTP API and worker protocol (and engine)
)

// childConfig is what a child process runs.
type childConfig struct {
	Mode        string        `json:"mode"`
	ID          string        `json:"id"` // incarnation id: worker id, engine id, effect-log worker_id
	DatabaseURL string        `json:"database_url"`
	ServerURL   string        `json:"server_url,omitempty"` // remote
	Addr        string        `json:"addr,omitempty"`       // server: where to listen
	Lease       time.Duration `json:"lease"`
	LeaderTTL   time.Duration `json:"leader_ttl"`
	Concurrency int           `json:"concurrency"`
	// Skew shifts the worker's own notion of wall-clock time (recorded as
	// worker_at in the effect log). Drover computes every lease, run_at and
	// retry time with the database's now(), so it must change nothing.
	Skew time.Duration `json:"skew,omitempty"`
}

// workArgs are the args of KindWork.
type workArgs struct {
	Seq int64 `json:"seq"`
	MS  int   `json:"ms"`
}

// RunChild runs the child process described by the EnvChild variable until its
// standard input closes (the harness stops it, or died), and returns the exit code.
// It reports on stdout, one line each:
//
//	ready ID
//	ok JOB ATTEMPT            the worker recorded the job as succeeded
//	ended JOB ATTEMPT         a KindWork handler of 1s or more returned
//	lost JOB ATTEMPT          a write of the worker was rejected: the lease was no longer its own
//	leader true|false ID UNIXNANO
//	stats inflight=N lease_lost=N succeeded=N   (answer to "stats" on stdin)
func RunChild(stdin io.Reader, stdout, stderr io.Writer) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(os.Getenv(EnvChild)), &cfg); err != nil {
		fmt.Fprintf(stdout, "fatal bad %s: %v\n", EnvChild, err)
		return 2
	}
	out := &syncWriter{w: stdout}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("proc", cfg.ID)
	c := &child{cfg: cfg, out: out, log: log}
	if err := c.run(stdin); err != nil {
		fmt.Fprintf(out, "fatal %v\n", err)
		return 1
	}
	return 0
}

type child struct {
	cfg      childConfig
	out      *syncWriter
	log      *slog.Logger
	effects  effectLog
	inflight atomic.Int64
}

func (c *child) printf(format string, a ...any) { fmt.Fprintf(c.out, format+"\n", a...) }

func (c *child) run(stdin io.Reader) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stats *drover.WorkerStats
	commands := make(chan string)
	go func() { // stdin: commands; EOF stops us
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			commands <- strings.TrimSpace(sc.Text())
		}
		cancel()
	}()

	var stop func() error
	var err error
	switch c.cfg.Mode {
	case modeWorker:
		stop, stats, err = c.startWorker(ctx)
	case modeRemote:
		stop, stats, err = c.startRemote(ctx)
	case modeServer:
		stop, err = c.startServer(ctx)
	default:
		err = fmt.Errorf("unknown mode %q", c.cfg.Mode)
	}
	if err != nil {
		return err
	}
	c.printf("ready %s", c.cfg.ID)
	for {
		select {
		case <-ctx.Done():
			return stop()
		case cmd := <-commands:
			if cmd == "stats" {
				var lost, ok int64
				if stats != nil {
					lost, ok = stats.LeaseLost.Load(), stats.Succeeded.Load()
				}
				c.printf("stats inflight=%d lease_lost=%d succeeded=%d", c.inflight.Load(), lost, ok)
			}
		}
	}
}

func (c *child) workerConfig(ws *drover.Workers) *drover.WorkerConfig {
	return &drover.WorkerConfig{
		ID: c.cfg.ID, Queues: map[string]int{drover.DefaultQueue: c.cfg.Concurrency}, Workers: ws,
		LeaseDuration: c.cfg.Lease, HeartbeatInterval: c.cfg.Lease / 4, PollInterval: 100 * time.Millisecond,
		TimeoutGrace: time.Second, Backoff: chaosBackoff, Observer: c, Logger: c.log,
	}
}

// chaosBackoff keeps retries quick so a run drains in seconds.
var chaosBackoff = drover.ExponentialBackoff(50*time.Millisecond, 500*time.Millisecond)

func (c *child) startWorker(ctx context.Context) (func() error, *drover.WorkerStats, error) {
	drv, err := drover.Open(ctx, c.cfg.DatabaseURL, c.log)
	if err != nil {
		return nil, nil, err
	}
	client, err := drover.NewClient(drv, &drover.Config{Logger: c.log})
	if err != nil {
		return nil, nil, err
	}
	switch d := drv.(type) {
	case interface{ Pool() *pgxpool.Pool }:
		c.effects = pgEffects{d.Pool()}
	case interface{ DB() *sql.DB }:
		c.effects = sqliteEffects{d.DB()}
	default:
		return nil, nil, fmt.Errorf("driver %s has no pool for the effect log", drv.Name())
	}
	w, err := drover.NewWorker(client, c.workerConfig(c.workers()))
	if err != nil {
		return nil, nil, err
	}
	engCtx, stopEngine := context.WithCancel(context.Background())
	engDone := c.runEngine(engCtx, client)
	if err := w.Start(ctx); err != nil {
		stopEngine()
		return nil, nil, err
	}
	return func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := w.Stop(sctx)
		stopEngine()
		<-engDone
		_ = drv.Close()
		return err
	}, w.Stats(), nil
}

func (c *child) runEngine(ctx context.Context, client *drover.Client) <-chan struct{} {
	e := drover.NewEngine(client, &drover.EngineConfig{
		ID: c.cfg.ID, LeaderTTL: c.cfg.LeaderTTL, ReapInterval: 200 * time.Millisecond,
		ReconcileInterval: 500 * time.Millisecond, Logger: c.log,
		OnLeader: func(leading bool) { c.printf("leader %t %s %d", leading, c.cfg.ID, time.Now().UnixNano()) },
	})
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	return done
}

func (c *child) startRemote(ctx context.Context) (func() error, *drover.WorkerStats, error) {
	// The worker itself never touches the database; only the handler's side
	// effect does, as a user's handler would write to its own store.
	pcfg, err := pgxpool.ParseConfig(c.cfg.DatabaseURL)
	if err != nil {
		return nil, nil, err
	}
	pcfg.MaxConns = int32(max(4, c.cfg.Concurrency))
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, nil, err
	}
	c.effects = pgEffects{pool}
	w, err := drover.NewRemoteWorker(drover.RemoteConfig{URL: c.cfg.ServerURL, WaitSeconds: 1}, c.workerConfig(c.workers()))
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	if err := w.Start(ctx); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := w.Stop(sctx)
		pool.Close()
		return err
	}, w.Stats(), nil
}

func (c *child) startServer(ctx context.Context) (func() error, error) {
	drv, err := drover.Open(ctx, c.cfg.DatabaseURL, c.log)
	if err != nil {
		return nil, err
	}
	client, err := drover.NewClient(drv, &drover.Config{Logger: c.log})
	if err != nil {
		return nil, err
	}
	engCtx, stopEngine := context.WithCancel(context.Background())
	engDone := c.runEngine(engCtx, client)
	srv := server.New(client, server.Config{LeaseDuration: c.cfg.Lease, Backoff: chaosBackoff, Logger: c.log})
	serveCtx, stopServe := context.WithCancel(context.Background())
	served := make(chan error, 1)
	bound := make(chan struct{})
	go func() {
		served <- server.ListenAndServe(serveCtx, srv, server.ListenConfig{
			Addr: c.cfg.Addr, ShutdownTimeout: 5 * time.Second, Ready: func(net.Addr) { close(bound) },
		}, c.log)
	}()
	select {
	case err := <-served:
		stopServe()
		stopEngine()
		srv.Close()
		return nil, err
	case <-bound:
	}
	return func() error {
		stopServe()
		err := <-served
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		srv.Close()
		stopEngine()
		<-engDone
		_ = drv.Close()
		return err
	}, nil
}

// workers registers the chaos kinds.
func (c *child) workers() *drover.Workers {
	ws := drover.NewWorkers()
	drover.Register(ws, KindWork, func(ctx context.Context, job *drover.Job, a workArgs) (any, error) {
		c.inflight.Add(1)
		defer c.inflight.Add(-1)
		workerAt := time.Now().Add(c.cfg.Skew)
		if err := c.effects.record(ctx, a.Seq, job, c.cfg.ID, workerAt); err != nil {
			return nil, fmt.Errorf("record side effect: %w", err)
		}
		if a.MS >= 1000 { // when a long handler returned: a cancel must end it early
			defer c.printf("ended %d %d", job.ID, job.Attempt)
		}
		t := time.NewTimer(time.Duration(a.MS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return map[string]int64{"seq": a.Seq}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	drover.Register(ws, KindPanic, func(context.Context, *drover.Job, struct{}) (any, error) {
		panic("chaos: this handler always panics")
	})
	drover.Register(ws, KindHang, func(context.Context, *drover.Job, struct{}) (any, error) {
		select {} // ignores its context: the worker must abandon it after the grace period
	})
	return ws
}

// Claimed implements drover.Observer.
func (c *child) Claimed(string, int) {}

// Finished implements drover.Observer: the worker's own belief that it completed a job.
func (c *child) Finished(job *drover.Job, outcome string, _ time.Duration) {
	if outcome == "succeeded" {
		c.printf("ok %d %d", job.ID, job.Attempt)
	}
}

// LeaseLost implements drover.Observer: a write of ours was refused as stale.
func (c *child) LeaseLost(job *drover.Job) { c.printf("lost %d %d", job.ID, job.Attempt) }

// effectLog is the handler's side effect: one row per execution.
type effectLog interface {
	record(ctx context.Context, seq int64, job *drover.Job, worker string, workerAt time.Time) error
}

// held says whether the execution still held the job's lease when it wrote the
// effect; an effect written without it comes from a worker that was paused or cut off.
type pgEffects struct{ pool *pgxpool.Pool }

func (p pgEffects) record(ctx context.Context, seq int64, job *drover.Job, worker string, workerAt time.Time) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO chaos_effects (seq, job_id, attempt, worker_id, lease_token, held, worker_at)
SELECT $1, $2, $3, $4, $5::text, EXISTS (SELECT 1 FROM drover_jobs WHERE id = $2 AND attempt = $3
    AND lease_token::text = $5::text AND status = 'running'), $6`,
		seq, job.ID, job.Attempt, worker, job.LeaseToken, workerAt)
	return err
}

type sqliteEffects struct{ db *sql.DB }

func (s sqliteEffects) record(ctx context.Context, seq int64, job *drover.Job, worker string, workerAt time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO chaos_effects (seq, job_id, attempt, worker_id, lease_token, held, at, worker_at)
SELECT ?1, ?2, ?3, ?4, ?5, EXISTS (SELECT 1 FROM drover_jobs WHERE id = ?2 AND attempt = ?3
    AND lease_token = ?5 AND status = 'running'), ?6, ?7`,
		seq, job.ID, job.Attempt, worker, job.LeaseToken, time.Now().UnixMicro(), workerAt.UnixMicro())
	return err
}

// syncWriter serialises writes so lines from several goroutines never interleave.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
