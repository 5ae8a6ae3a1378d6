package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverArgs are the args of every River benchmark job: {"seq": N}.
type riverArgs struct {
	Seq int64 `json:"seq"`
}

func (riverArgs) Kind() string { return "bench" }

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	t *tracker
}

func (w *riverWorker) Work(_ context.Context, j *river.Job[riverArgs]) error {
	w.t.executedSeq(j.Args.Seq)
	return nil
}

// riverKnobs are River's client settings. The defaults are those of River's own
// benchmark (riverbench): FetchCooldown 2 ms, FetchPollInterval 20 ms, MaxWorkers
// 2000; everything else is River's default (its batching completer included).
type riverKnobs struct {
	maxWorkers    int
	fetchCooldown time.Duration
	fetchPoll     time.Duration
	insertFast    bool // InsertManyFast (COPY) instead of InsertMany
}

// riverSys runs River v0.5x through its public API in its own schema.
type riverSys struct {
	k        riverKnobs
	admin    *pgxpool.Pool
	dbURL    string
	schema   string
	maxConns int
	explain  *explainLog

	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx] // the working client while started, else an insert-only one
	started bool
	subDone chan struct{}

	doneTemplate, futureTemplate int64
}

func newRiver(admin *pgxpool.Pool, dbURL string, maxConns int, ex *explainLog, k riverKnobs) *riverSys {
	return &riverSys{k: k, admin: admin, dbURL: dbURL, schema: "bench_river", maxConns: maxConns, explain: ex}
}

func (s *riverSys) name() string { return "river" }

// twin is the same system in the schema s.schema+suffix; it is reset apart.
func (s *riverSys) twin(suffix string) system {
	return &riverSys{k: s.k, admin: s.admin, dbURL: s.dbURL, schema: s.schema + suffix, maxConns: s.maxConns, explain: s.explain}
}

var discard = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

func (s *riverSys) reset(ctx context.Context) error {
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
	s.doneTemplate, s.futureTemplate = 0, 0
	if err := resetSchema(ctx, s.admin, s.schema); err != nil {
		return err
	}
	var err error
	if s.pool, err = newPool(ctx, s.dbURL, s.schema, s.maxConns, s.explain, s.name()); err != nil {
		return err
	}
	m, err := rivermigrate.New(riverpgxv5.New(s.pool), &rivermigrate.Config{Schema: s.schema, Logger: discard})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	s.client, err = river.NewClient(riverpgxv5.New(s.pool), &river.Config{Schema: s.schema, Logger: discard})
	return err
}

func (s *riverSys) insertBatch(ctx context.Context, first int64, n int) error {
	return insertRiverBatch(ctx, s.client, s.k.insertFast, first, n)
}

// insertRiverBatch inserts the jobs seqs [first, first+n) with c's InsertManyFast
// (COPY on PostgreSQL), or its InsertMany when fast is false.
func insertRiverBatch[TTx any](ctx context.Context, c *river.Client[TTx], fast bool, first int64, n int) error {
	ps := make([]river.InsertManyParams, n)
	for i := range ps {
		ps[i] = river.InsertManyParams{Args: riverArgs{Seq: first + int64(i)}}
	}
	var err error
	if fast {
		_, err = c.InsertManyFast(ctx, ps)
	} else {
		_, err = c.InsertMany(ctx, ps)
	}
	return err
}

func (s *riverSys) insertOne(ctx context.Context, seq int64) error {
	_, err := s.client.Insert(ctx, riverArgs{Seq: seq}, nil)
	return err
}

func (s *riverSys) start(ctx context.Context, t *tracker) error {
	c, done, err := startRiver(ctx, riverpgxv5.New(s.pool), s.schema, s.k, t, s.name())
	if err != nil {
		return err
	}
	s.client, s.subDone, s.started = c, done, true
	return nil
}

func (s *riverSys) stop(ctx context.Context) error {
	if !s.started {
		return errNotStarted
	}
	s.started = false
	return stopRiver(ctx, s.client, s.subDone, s.name())
}

// startRiver starts a River client with knobs k on drv that reports its jobs to
// t: River on PostgreSQL and on SQLite alike. Completions are counted from the
// subscription, which River feeds after its completer has committed the job's
// new state (as riverbench does). Its channel drops events when full, so it is
// large and drained at once; done closes when it ends, with the client.
func startRiver[TTx any](ctx context.Context, drv riverdriver.Driver[TTx], schema string, k riverKnobs, t *tracker, label string) (*river.Client[TTx], chan struct{}, error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{t: t})
	c, err := river.NewClient(drv, &river.Config{
		Schema:            schema,
		Logger:            discard,
		FetchCooldown:     k.fetchCooldown,
		FetchPollInterval: k.fetchPoll,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: k.maxWorkers}},
		Workers:           workers,
	})
	if err != nil {
		return nil, nil, err
	}
	events, cancel := c.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: 200_000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range events {
			if ev.Kind == river.EventKindJobCompleted {
				t.completedSeq(parseSeq(ev.Job.EncodedArgs))
			} else {
				logf("%s: job %d ended %s", label, ev.Job.ID, ev.Kind)
			}
		}
	}()
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		cancel()
		return nil, nil, err
	}
	_ = cancel // the subscription ends with the client
	return c, done, nil
}

// stopRiver stops c and waits for its subscription (startRiver's done) to end.
func stopRiver[TTx any](ctx context.Context, c *river.Client[TTx], done chan struct{}, label string) error {
	err := c.Stop(ctx)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		logf("%s: subscription did not close", label)
	}
	return err
}

func (s *riverSys) unfinished(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state <> 'completed'").Scan(&n)
	return n, err
}

// seed makes one completed job (inserted and worked by River) and one scheduled
// ten years out, then copies them in SQL.
func (s *riverSys) seed(ctx context.Context, done, future int64) error {
	if s.doneTemplate == 0 {
		t := newTracker(false)
		t.watch = make(chan int64, 1)
		t.reserve(1)
		if err := s.start(ctx, t); err != nil {
			return err
		}
		res, err := s.client.Insert(ctx, riverArgs{Seq: 0}, nil)
		if err == nil {
			select {
			case <-t.watch:
			case <-time.After(30 * time.Second):
				var st string
				_ = s.pool.QueryRow(ctx, "SELECT state::text || ' attempt ' || attempt FROM river_job WHERE id = $1", res.Job.ID).Scan(&st)
				err = fmt.Errorf("river: template job %d never completed (%s; %d executed)", res.Job.ID, st, t.executed.Load())
			}
		}
		if serr := s.stop(ctx); err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
		fut, err := s.client.Insert(ctx, riverArgs{Seq: 0}, &river.InsertOpts{ScheduledAt: time.Now().AddDate(10, 0, 0)})
		if err != nil {
			return err
		}
		s.doneTemplate, s.futureTemplate = res.Job.ID, fut.Job.ID
		done, future = done-1, future-1
	}
	if err := cloneRows(ctx, s.pool, s.schema, "river_job", s.doneTemplate, done); err != nil {
		return err
	}
	return cloneRows(ctx, s.pool, s.schema, "river_job", s.futureTemplate, future)
}

func (s *riverSys) wipe(ctx context.Context) error {
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
	_, err := s.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+s.schema+" CASCADE")
	return err
}

func (s *riverSys) close() {
	if s.started {
		_ = s.stop(context.Background())
	}
	_ = s.wipe(context.Background())
}
