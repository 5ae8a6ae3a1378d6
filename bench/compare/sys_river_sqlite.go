package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// riverSQLiteSys runs River on SQLite (its riversqlite driver) through its public
// API, on a file opened as raw-sqlite's is: WAL, synchronous=FULL, transactions
// begun IMMEDIATE, one connection, the pool size River's driver asks for. It runs
// burn-down and continuous, as the other SQLite systems do, with River's knobs:
// the SQLite line's question is what a queue that keeps its own guarantees gets
// out of the same database, and River is the reference queue of this comparison.
type riverSQLiteSys struct {
	k    riverKnobs
	path string

	db      *sql.DB
	client  *river.Client[*sql.Tx] // the working client while started, else an insert-only one
	started bool
	subDone chan struct{}
}

func newRiverSQLite(dir string, k riverKnobs) *riverSQLiteSys {
	return &riverSQLiteSys{k: k, path: filepath.Join(dir, "river.db")}
}

func (s *riverSQLiteSys) name() string { return "river-sqlite" }

func (s *riverSQLiteSys) reset(ctx context.Context) error {
	if err := s.wipe(ctx); err != nil {
		return err
	}
	db, err := openRawSQLite(s.path)
	if err != nil {
		return err
	}
	s.db = db
	m, err := rivermigrate.New(riversqlite.New(s.db), &rivermigrate.Config{Logger: discard})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	s.client, err = river.NewClient(riversqlite.New(s.db), &river.Config{Logger: discard})
	return err
}

func (s *riverSQLiteSys) insertBatch(ctx context.Context, first int64, n int) error {
	return insertRiverBatch(ctx, s.client, s.k.insertFast, first, n)
}

func (s *riverSQLiteSys) insertOne(ctx context.Context, seq int64) error {
	_, err := s.client.Insert(ctx, riverArgs{Seq: seq}, nil)
	return err
}

func (s *riverSQLiteSys) start(ctx context.Context, t *tracker) error {
	c, done, err := startRiver(ctx, riversqlite.New(s.db), "", s.k, t, s.name())
	if err != nil {
		return err
	}
	s.client, s.subDone, s.started = c, done, true
	return nil
}

func (s *riverSQLiteSys) stop(ctx context.Context) error {
	if !s.started {
		return errNotStarted
	}
	s.started = false
	return stopRiver(ctx, s.client, s.subDone, s.name())
}

func (s *riverSQLiteSys) unfinished(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM river_job WHERE state <> 'completed'").Scan(&n)
	return n, err
}

func (s *riverSQLiteSys) wipe(context.Context) error {
	if s.db != nil {
		_ = s.db.Close()
		s.db = nil
	}
	return removeSQLite(s.path)
}

func (s *riverSQLiteSys) close() {
	if s.started {
		_ = s.stop(context.Background())
	}
	_ = s.wipe(context.Background())
}
