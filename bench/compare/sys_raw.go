package main

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	_ "modernc.org/sqlite" // the driver Drover's SQLite driver uses
)

// The raw baseline: the fewest row writes one job needs, with no queue logic —
// one table (id, state, args), a multi-row INSERT per batch, a claim UPDATE of a
// batch picked with FOR UPDATE SKIP LOCKED (PostgreSQL) or LIMIT (SQLite, one
// writer), and a completion UPDATE per batch of finished jobs. Its worker has
// Drover's shape: one claim loop taking min(free slots, claim batch), a goroutine
// per job, and a completer writing whatever completions are waiting, up to the
// completion batch, in one statement.
type rawStore interface {
	reset(ctx context.Context) error
	insert(ctx context.Context, seqs []int64) error
	claim(ctx context.Context, n int) ([]rawJob, error)
	complete(ctx context.Context, ids []int64) error
	unfinished(ctx context.Context) (int64, error)
	wipe(ctx context.Context) error
}

type rawJob struct {
	id   int64
	args []byte
}

type rawSys struct {
	label string
	store rawStore
	k     knobs

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (s *rawSys) name() string                    { return s.label }
func (s *rawSys) reset(ctx context.Context) error { return s.store.reset(ctx) }
func (s *rawSys) wipe(ctx context.Context) error  { return s.store.wipe(ctx) }
func (s *rawSys) close() {
	if s.cancel != nil {
		_ = s.stop(context.Background())
	}
	_ = s.store.wipe(context.Background())
}
func (s *rawSys) unfinished(ctx context.Context) (int64, error) { return s.store.unfinished(ctx) }

func (s *rawSys) insertBatch(ctx context.Context, first int64, n int) error {
	seqs := make([]int64, n)
	for i := range seqs {
		seqs[i] = first + int64(i)
	}
	return s.store.insert(ctx, seqs)
}

func (s *rawSys) insertOne(ctx context.Context, seq int64) error {
	return s.store.insert(ctx, []int64{seq})
}

type rawCompletion struct {
	id, seq int64
	done    chan struct{}
}

func (s *rawSys) start(ctx context.Context, t *tracker) error {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	slots := s.k.concurrency
	claimBatch := s.k.rawClaimBatch()
	completions := make(chan rawCompletion, s.k.rawCompletionBatch())
	var handlers sync.WaitGroup
	var running atomic.Int64
	freed := make(chan struct{}, 1)
	poll := 10 * time.Millisecond

	// completer
	compDone := make(chan struct{})
	go func() {
		defer close(compDone)
		max := s.k.rawCompletionBatch()
		for first := range completions {
			batch := []rawCompletion{first}
		fill:
			for len(batch) < max {
				select {
				case c, ok := <-completions:
					if !ok {
						break fill
					}
					batch = append(batch, c)
				default:
					break fill
				}
			}
			ids := make([]int64, len(batch))
			for i, c := range batch {
				ids[i] = c.id
			}
			done := s.completeBatch(ctx, ids)
			for _, c := range batch {
				if done {
					t.completedSeq(c.seq)
				}
				close(c.done)
			}
		}
	}()

	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			handlers.Wait()
			close(completions)
			<-compDone
		}()
		for {
			if free := slots - int(running.Load()); free > 0 && ctx.Err() == nil {
				want := min(free, claimBatch)
				jobs, err := s.store.claim(ctx, want)
				if err != nil && ctx.Err() == nil {
					logf("%s: claim: %v", s.label, err)
				}
				for _, j := range jobs {
					running.Add(1)
					handlers.Add(1)
					go func() {
						defer handlers.Done()
						seq := parseSeq(j.args) // the handler decodes its args
						t.executedSeq(seq)
						c := rawCompletion{id: j.id, seq: seq, done: make(chan struct{})}
						completions <- c
						<-c.done
						running.Add(-1)
						select {
						case freed <- struct{}{}:
						default:
						}
					}()
				}
				if err == nil && len(jobs) == want {
					continue
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-freed:
			case <-time.After(poll):
			}
		}
	}()
	return nil
}

// completeBatch writes the completions of ids, retrying a failure, and
// reports whether they were written. A batch that still fails once the worker
// is stopping (ctx done) is given up, its jobs not completed, so that stop
// returns and the run reports them rather than hanging.
func (s *rawSys) completeBatch(ctx context.Context, ids []int64) bool {
	for failedStopping := 0; ; {
		err := s.store.complete(context.Background(), ids)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			if failedStopping++; failedStopping > 20 {
				logf("%s: complete: %v; stopping, %d jobs given up", s.label, err, len(ids))
				return false
			}
		}
		logf("%s: complete: %v; retrying", s.label, err)
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *rawSys) stop(context.Context) error {
	if s.cancel == nil {
		return errNotStarted
	}
	s.cancel()
	s.wg.Wait()
	s.cancel = nil
	return nil
}

// rawPG is the raw baseline on PostgreSQL, in its own schema.
type rawPG struct {
	// cursor is the id past which the next claim starts: the last id of a
	// claim that took all it asked for; 0 after a short one, which scans
	// from the start. Each claimed job leaves its entry in raw_jobs_queued
	// until VACUUM removes it, and a claim from the start read every one of
	// them again: at 500k claimed, 15–32 ms a claim against 6.5 from the
	// cursor, and raw's burn-down ran at 76k jobs/s against 96k with it
	// (helper-21, forty-eighth session). Drover's claim has kept such a
	// cursor since the fifth session, so raw without one was a slower
	// baseline than the database's limit. Only the claim loop (one
	// goroutine) uses it.
	cursor   int64
	admin    *pgxpool.Pool
	dbURL    string
	schema   string
	maxConns int
	explain  *explainLog
	pool     *pgxpool.Pool
}

func newRawPG(admin *pgxpool.Pool, dbURL string, maxConns int, ex *explainLog, k knobs) *rawSys {
	return &rawSys{label: "raw", k: k, store: &rawPG{admin: admin, dbURL: dbURL, schema: "bench_raw", maxConns: maxConns, explain: ex}}
}

func (r *rawPG) reset(ctx context.Context) error {
	if r.pool != nil {
		r.pool.Close()
		r.pool = nil
	}
	if err := resetSchema(ctx, r.admin, r.schema); err != nil {
		return err
	}
	var err error
	if r.pool, err = newPool(ctx, r.dbURL, r.schema, r.maxConns, r.explain, "raw"); err != nil {
		return err
	}
	r.cursor = 0
	// state: 0 queued, 1 running, 2 done.
	_, err = r.pool.Exec(ctx, `
		CREATE TABLE raw_jobs (id bigserial PRIMARY KEY, state smallint NOT NULL DEFAULT 0, args jsonb NOT NULL);
		CREATE INDEX raw_jobs_queued ON raw_jobs (id) WHERE state = 0`)
	return err
}

func (r *rawPG) insert(ctx context.Context, seqs []int64) error {
	_, err := r.pool.Exec(ctx, `INSERT INTO raw_jobs (args) SELECT jsonb_build_object('seq', s) FROM unnest($1::bigint[]) s`, seqs)
	return err
}

func (r *rawPG) claim(ctx context.Context, n int) ([]rawJob, error) {
	from := r.cursor
	r.cursor = 0 // unless this claim takes all it asks for
	rows, err := r.pool.Query(ctx, `UPDATE raw_jobs SET state = 1 WHERE id IN (
		SELECT id FROM raw_jobs WHERE state = 0 AND id > $2 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
		RETURNING id, args`, n, from)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	jobs, err := scanRawJobs(rows)
	if err == nil && len(jobs) == n {
		for _, j := range jobs {
			r.cursor = max(r.cursor, j.id)
		}
	}
	return jobs, err
}

func (r *rawPG) complete(ctx context.Context, ids []int64) error {
	_, err := r.pool.Exec(ctx, `UPDATE raw_jobs SET state = 2 WHERE id = ANY($1) AND state = 1`, ids)
	return err
}

func (r *rawPG) unfinished(ctx context.Context) (int64, error) {
	var n int64
	err := r.pool.QueryRow(ctx, "SELECT count(*) FROM raw_jobs WHERE state <> 2").Scan(&n)
	return n, err
}

func (r *rawPG) wipe(ctx context.Context) error {
	if r.pool != nil {
		r.pool.Close()
		r.pool = nil
	}
	_, err := r.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+r.schema+" CASCADE")
	return err
}

// rawSQLite is the raw baseline on SQLite with Drover's connection settings (WAL,
// synchronous=FULL, BEGIN IMMEDIATE, one writer connection).
type rawSQLite struct {
	path string
	db   *sql.DB
}

func newRawSQLite(dir string, k knobs) *rawSys {
	return &rawSys{label: "raw-sqlite", k: k, store: &rawSQLite{path: filepath.Join(dir, "raw.db")}}
}

func (r *rawSQLite) reset(ctx context.Context) error {
	if err := r.reopen(ctx); err != nil {
		return err
	}
	_, err := r.db.ExecContext(ctx, `
		CREATE TABLE raw_jobs (id INTEGER PRIMARY KEY, state INTEGER NOT NULL DEFAULT 0, args TEXT NOT NULL);
		CREATE INDEX raw_jobs_queued ON raw_jobs (id) WHERE state = 0`)
	return err
}

func (r *rawSQLite) insert(ctx context.Context, seqs []int64) error {
	var b strings.Builder
	b.WriteString("INSERT INTO raw_jobs (args) VALUES ")
	args := argsRows(&b, make([]any, 0, len(seqs)), seqs)
	_, err := r.db.ExecContext(ctx, b.String(), args...)
	return err
}

func (r *rawSQLite) claim(ctx context.Context, n int) ([]rawJob, error) {
	rows, err := r.db.QueryContext(ctx, `UPDATE raw_jobs SET state = 1 WHERE id IN (
		SELECT id FROM raw_jobs WHERE state = 0 ORDER BY id LIMIT ?) RETURNING id, args`, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return scanRawJobs(rows)
}

func (r *rawSQLite) complete(ctx context.Context, ids []int64) error {
	_, err := r.db.ExecContext(ctx, `UPDATE raw_jobs SET state = 2 WHERE id IN (SELECT value FROM json_each(?)) AND state = 1`, idsJSON(ids))
	return err
}

func (r *rawSQLite) unfinished(ctx context.Context) (int64, error) {
	var n int64
	err := r.db.QueryRowContext(ctx, "SELECT count(*) FROM raw_jobs WHERE state <> 2").Scan(&n)
	return n, err
}

func (r *rawSQLite) wipe(context.Context) error {
	if r.db != nil {
		_ = r.db.Close()
		r.db = nil
	}
	return removeSQLite(r.path)
}

// reopen deletes r's file and opens a new, empty one in its place.
func (r *rawSQLite) reopen(ctx context.Context) error {
	if err := r.wipe(ctx); err != nil {
		return err
	}
	db, err := openRawSQLite(r.path)
	if err != nil {
		return err
	}
	r.db = db
	return nil
}

// argsRows writes a "(?)" row per seq to b, comma-separated, and appends each
// one's args (argsOf) to args, which it returns.
func argsRows(b *strings.Builder, args []any, seqs []int64) []any {
	for i, s := range seqs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?)")
		args = append(args, string(argsOf(s)))
	}
	return args
}

// openRawSQLite opens the SQLite file at path as Drover's driver does (WAL,
// synchronous=FULL, transactions begun IMMEDIATE) on one connection.
func openRawSQLite(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("_synchronous", "FULL")
	q.Set("_journal_mode", "WAL")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return db, nil
}

// removeSQLite deletes a database file with its WAL and shared-memory files.
func removeSQLite(path string) error {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// scanRawJobs reads (id, args) rows from pgx or database/sql.
func scanRawJobs(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
}) ([]rawJob, error) {
	var out []rawJob
	for rows.Next() {
		var j rawJob
		if err := rows.Scan(&j.id, &j.args); err != nil {
			return out, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}
