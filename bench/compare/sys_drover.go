package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/driver/sqlitedriver"
)

const droverKind = "bench"

// droverSys runs Drover through its public API: EnqueueMany, NewWorker with an
// Observer, and an Engine (the maintenance loops every Drover process runs, as
// River's client runs its own).
type droverSys struct {
	label string
	k     knobs

	// PostgreSQL
	admin    *pgxpool.Pool
	dbURL    string
	schema   string
	maxConns int
	explain  *explainLog
	pool     *pgxpool.Pool
	// SQLite
	sqlitePath string

	drv    driver.Driver
	client *drover.Client

	worker       *drover.Worker
	engineCancel context.CancelFunc
	engineDone   chan struct{}

	doneTemplate, futureTemplate int64
}

func newDroverPG(admin *pgxpool.Pool, dbURL string, maxConns int, ex *explainLog, k knobs) *droverSys {
	return &droverSys{label: "drover", k: k, admin: admin, dbURL: dbURL, schema: "bench_drover", maxConns: maxConns, explain: ex}
}

func newDroverSQLite(dir string, k knobs) *droverSys {
	return &droverSys{label: "drover-sqlite", k: k, sqlitePath: filepath.Join(dir, "drover.db")}
}

func (s *droverSys) name() string { return s.label }

// twin is the same system in the schema s.schema+suffix; it is reset apart.
func (s *droverSys) twin(suffix string) system {
	return &droverSys{label: s.label, k: s.k, admin: s.admin, dbURL: s.dbURL, schema: s.schema + suffix, maxConns: s.maxConns, explain: s.explain}
}

func (s *droverSys) reset(ctx context.Context) error {
	s.closeDB()
	s.doneTemplate, s.futureTemplate = 0, 0
	var err error
	if s.sqlitePath != "" {
		if err := removeSQLite(s.sqlitePath); err != nil {
			return err
		}
		// Only a driver that opened goes into s.drv: a nil *Driver in the
		// interface is not nil, and closeDB called Close on it (a panic
		// that hid the error).
		var d *sqlitedriver.Driver
		if d, err = sqlitedriver.Open(s.sqlitePath, sqlitedriver.Options{}); err == nil {
			s.drv = d
		}
	} else {
		if err := resetSchema(ctx, s.admin, s.schema); err != nil {
			return err
		}
		if s.pool, err = newPool(ctx, s.dbURL, s.schema, s.maxConns, s.explain, s.label); err != nil {
			return err
		}
		var d *pgdriver.Driver
		if d, err = pgdriver.NewFromPool(ctx, s.pool, pgdriver.Options{}); err == nil {
			s.drv = d
		}
	}
	if err != nil {
		return err
	}
	if err := s.drv.MigrateUp(ctx); err != nil {
		return err
	}
	s.client, err = drover.NewClient(s.drv, nil)
	return err
}

func argsOf(seq int64) []byte {
	b := make([]byte, 0, 24)
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	return append(b, '}')
}

func (s *droverSys) insertBatch(ctx context.Context, first int64, n int) error {
	ps := make([]drover.EnqueueParams, n)
	for i := range ps {
		ps[i] = drover.EnqueueParams{Kind: droverKind, Args: argsOf(first + int64(i))}
	}
	_, err := s.client.EnqueueMany(ctx, ps)
	return err
}

func (s *droverSys) insertOne(ctx context.Context, seq int64) error {
	_, err := s.client.Enqueue(ctx, droverKind, argsOf(seq), nil)
	return err
}

// observer hears the worker's durable outcomes: Finished is called after the
// completion's transaction committed.
type observer struct {
	t         *tracker
	leaseLost func()
}

func (o observer) Claimed(_ string, n int) { o.t.claimed.Add(int64(n)) }
func (o observer) Finished(job *drover.Job, outcome string, _ time.Duration) {
	if outcome == "succeeded" {
		o.t.completedSeq(parseSeq(job.Args))
	}
}
func (o observer) LeaseLost(*drover.Job) { o.leaseLost() }

func (s *droverSys) start(ctx context.Context, t *tracker) error {
	workers := drover.NewWorkers()
	drover.Register(workers, droverKind, func(_ context.Context, _ *drover.Job, a seqArgs) (any, error) {
		t.executedSeq(a.Seq)
		return nil, nil
	})
	cfg := &drover.WorkerConfig{
		Queues:          map[string]int{drover.DefaultQueue: s.k.concurrency},
		Workers:         workers,
		ClaimBatch:      s.k.claimBatch,
		CompletionBatch: s.k.completionBatch,
		Observer:        observer{t: t, leaseLost: func() { logf("%s: a lease was lost", s.label) }},
	}
	if s.k.pollInterval > 0 {
		cfg.PollInterval = time.Duration(s.k.pollInterval) * time.Millisecond
	}
	w, err := drover.NewWorker(s.client, cfg)
	if err != nil {
		return err
	}
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	eng := drover.NewEngine(s.client, nil)
	s.engineCancel, s.engineDone = cancel, make(chan struct{})
	go func() { defer close(s.engineDone); eng.Run(ectx) }()
	if err := w.Start(ctx); err != nil {
		s.stopEngine()
		return err
	}
	s.worker = w
	return nil
}

func (s *droverSys) stopEngine() {
	if s.engineCancel != nil {
		s.engineCancel()
		<-s.engineDone
		s.engineCancel = nil
	}
}

func (s *droverSys) stop(ctx context.Context) error {
	if s.worker == nil {
		return errNotStarted
	}
	err := s.worker.Stop(ctx)
	s.worker = nil
	s.stopEngine()
	return err
}

// unfinished counts Drover's job rows not succeeded, read from the rows as
// River's and raw's checks read theirs. Drover's own counts (client.Queues)
// are written by the same statements as the transitions they count, so a
// transition that moved a row without its count was not seen (helper-81).
func (s *droverSys) unfinished(ctx context.Context) (int64, error) {
	const q = "SELECT count(*) FROM drover_jobs WHERE status <> 'succeeded'"
	var n int64
	switch d := s.drv.(type) {
	case *pgdriver.Driver:
		err := d.Pool().QueryRow(ctx, q).Scan(&n)
		return n, err
	case *sqlitedriver.Driver:
		err := d.DB().QueryRowContext(ctx, q).Scan(&n)
		return n, err
	}
	return 0, fmt.Errorf("%s: no rows to count in a %T", s.label, s.drv)
}

// seed makes one succeeded job (enqueued and worked) and one job waiting ten
// years out, then copies them in SQL. PostgreSQL only.
func (s *droverSys) seed(ctx context.Context, done, future int64) error {
	if s.pool == nil {
		return fmt.Errorf("%s: backlog seeding needs PostgreSQL", s.label)
	}
	if s.doneTemplate == 0 {
		t := newTracker(false)
		t.watch = make(chan int64, 1)
		t.reserve(1)
		if err := s.start(ctx, t); err != nil {
			return err
		}
		res, err := s.client.Enqueue(ctx, droverKind, argsOf(0), nil)
		if err == nil {
			select {
			case <-t.watch:
			case <-time.After(30 * time.Second):
				err = fmt.Errorf("%s: template job never completed", s.label)
			}
		}
		if serr := s.stop(ctx); err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
		fut, err := s.client.Enqueue(ctx, droverKind, argsOf(0), &drover.EnqueueOpts{RunAt: time.Now().AddDate(10, 0, 0)})
		if err != nil {
			return err
		}
		s.doneTemplate, s.futureTemplate = res.Job.ID, fut.Job.ID
		done, future = done-1, future-1
	}
	if err := cloneRows(ctx, s.pool, s.schema, "drover_jobs", s.doneTemplate, done); err != nil {
		return err
	}
	var last int64
	jobs, ready := pgx.Identifier{s.schema, "drover_jobs"}.Sanitize(), pgx.Identifier{s.schema, "drover_ready"}.Sanitize()
	if err := s.pool.QueryRow(ctx, "SELECT max(id) FROM "+jobs).Scan(&last); err != nil {
		return err
	}
	if err := cloneRows(ctx, s.pool, s.schema, "drover_jobs", s.futureTemplate, future); err != nil {
		return err
	}
	// The copies wait like the template, so they belong in the claimable set
	// (drover_ready), which the claim reads, as they would had they been enqueued.
	_, err := s.pool.Exec(ctx, "INSERT INTO "+ready+" (queue, priority, run_at, id) SELECT queue, priority, run_at, id FROM "+
		jobs+" WHERE id > $1 AND status = 'queued'", last)
	return err
}

func (s *droverSys) closeDB() {
	if s.drv != nil {
		_ = s.drv.Close()
		s.drv = nil
	}
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
}

func (s *droverSys) wipe(ctx context.Context) error {
	s.closeDB()
	if s.sqlitePath != "" {
		return removeSQLite(s.sqlitePath)
	}
	_, err := s.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+s.schema+" CASCADE")
	return err
}

func (s *droverSys) close() {
	if s.worker != nil {
		_ = s.stop(context.Background())
	}
	_ = s.wipe(context.Background())
}
