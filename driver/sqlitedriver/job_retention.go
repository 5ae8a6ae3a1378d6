package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// JobDeleteFinished deletes up to Limit (default 1000) terminal jobs finished
// before Before (or more than OlderThan ago), with their events. Returns how many jobs were deleted.
func (d *Driver) JobDeleteFinished(ctx context.Context, p driver.DeleteFinishedParams) (int, error) {
	if err := p.Check(); err != nil {
		return 0, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var n int
	err := d.bulkTx(ctx, func(tx *sql.Tx) error {
		before := p.Before
		if before.IsZero() {
			before = clock(nil).Add(-p.OlderThan) // the clock finished_at was written by
		}
		ids, err := selectIDs(ctx, tx, queries.Get("FinishedBefore"), sql.Named("before", micros(before)), sql.Named("limit", limit))
		if err != nil {
			return fmt.Errorf("delete finished jobs: %w", err)
		}
		n, err = deleteJobs(ctx, tx, ids)
		return err
	})
	return n, err
}

// JobDLQRequeue enqueues a new queued job copying the failed job's kind, args,
// queue, priority, max_attempts, timeout and metadata, with retry_of = ID and no
// idempotency key. The failed row stays as the record. A failed job is
// requeued at most once: if a job with retry_of = ID exists, it is returned
// with Replayed set and nothing is written (the write transaction makes the
// look-up and the insert one step).
func (d *Driver) JobDLQRequeue(ctx context.Context, p driver.DLQRequeueParams) (*driver.Job, error) {
	actor := p.Actor
	if actor == "" {
		actor = actorOperator
	}
	var res driver.InsertResult
	var now time.Time
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		now = time.Now().UTC() // once the write lock is held
		old, err := mustGetJob(ctx, tx, "DLQ requeue", p.ID)
		if err != nil {
			return err
		}
		if old.Status != lifecycle.StatusFailed {
			return fmt.Errorf("%w (%s)", driver.Refused("DLQ requeue", p.ID, old.Status, old.Attempt, driver.ErrInvalidTransition), driver.DLQOnlyFailed)
		}
		prev, err := queryJob(ctx, tx, queries.Get("JobDLQRetry"), sql.Named("id", p.ID))
		if err != nil {
			return fmt.Errorf("DLQ requeue job %d: look up an earlier requeue: %w", p.ID, err)
		}
		if prev != nil {
			prev.Replayed = true
			res.Job = prev
			return nil
		}
		retryOf := old.ID
		rs, err := insertMany(ctx, tx, []driver.InsertParams{{
			Kind:        old.Kind,
			Args:        old.Args,
			Queue:       old.Queue,
			Priority:    old.Priority,
			MaxAttempts: old.MaxAttempts,
			Timeout:     old.Timeout,
			Metadata:    old.Metadata,
			RetryOf:     &retryOf,
			Actor:       actor,
		}}, now)
		if err == nil {
			res = rs[0]
		}
		if err != nil {
			return fmt.Errorf("DLQ requeue job %d: %w", p.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !res.Job.Replayed {
		d.wake.publish([]string{res.Job.Queue})
	}
	return res.Job, nil
}

// bulkTx runs one write transaction of a bulk delete (retention's, a DLQ
// purge's) after a pause as long as this driver's last one took. SQLite has
// one writer for the whole file, and another process waiting for it sleeps in
// SQLite's busy handler between looks (1, 2, 5 … ms, then 100 ms at a time):
// run back to back, the transactions left it almost no moment to find the
// file free, so its enqueues and completions waited for the whole bulk delete
// (all of a 200k-job retention pass), and past busy_timeout (10 s) failed.
// Paced, a bulk delete holds the file at most half the time, and a waiting
// writer finds it free within a few looks; within this process, writers take
// turns on the one write connection either way.
func (d *Driver) bulkTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	d.bulkMu.Lock()
	wait := time.Until(d.bulkNext)
	d.bulkMu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	var began time.Time
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		began = time.Now() // the write lock is held from here
		return fn(tx)
	})
	if !began.IsZero() {
		end := time.Now()
		d.bulkMu.Lock()
		d.bulkNext = end.Add(end.Sub(began))
		d.bulkMu.Unlock()
	}
	return err
}

// purgeBatch is how many failed jobs one transaction of JobDLQPurge deletes
// (Driver.purgeBatch, when set, for tests).
const purgeBatch = 1000

// JobDLQPurge deletes failed jobs (of Queue only, when set) with their events,
// in id order, purgeBatch a transaction, as retention does. SQLite has one
// writer for the whole file: one transaction over 1.44M failed jobs held it for
// 9 s, and every process's heartbeats and completions waited, until jobs
// running elsewhere lost their leases. It deletes the jobs that were failed
// when it began, read first in one snapshot (8 bytes a job), as PostgreSQL's
// one statement does: a job that fails while the batches run is a DLQ entry
// the operator has not seen, and paging on by id deleted it with the rest when
// its id was past the batch under way. On an error the count is of the batches
// that committed.
func (d *Driver) JobDLQPurge(ctx context.Context, p driver.DLQPurgeParams) (int, error) {
	batch := purgeBatch
	if d.purgeBatch > 0 {
		batch = d.purgeBatch
	}
	ids, err := d.failedIDs(ctx, p.Queue)
	if err != nil {
		return 0, fmt.Errorf("purge dead-letter queue: %w", err)
	}
	total := 0
	for len(ids) > 0 {
		next := ids[:min(batch, len(ids))]
		ids = ids[len(next):]
		n := 0
		// A failed job never changes and ids are never reused (AUTOINCREMENT):
		// an id read above is that failed job's, or nobody's once retention
		// deleted it, which the count leaves out.
		err := d.bulkTx(ctx, func(tx *sql.Tx) error {
			var err error
			n, err = deleteJobs(ctx, tx, next)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// failedIDs reads the ids of the failed jobs (of queue, when set) in one read
// snapshot, in id order.
func (d *Driver) failedIDs(ctx context.Context, queue string) ([]int64, error) {
	tx, err := d.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }() // it only read
	return selectIDs(ctx, tx, queries.Get("FailedJobs"), sql.Named("queue", queue))
}

func selectIDs(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// deleteJobs deletes jobs and their events (events have no foreign key).
func deleteJobs(ctx context.Context, tx *sql.Tx, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	list := sql.Named("ids", jsonList(ids))
	if _, err := tx.ExecContext(ctx, queries.Get("EventsDelete"), list); err != nil {
		return 0, fmt.Errorf("delete events: %w", err)
	}
	n, gone, err := deleteRows(ctx, tx, list)
	if err != nil {
		return 0, fmt.Errorf("delete jobs: %w", err)
	}
	return n, gone.write(ctx, tx)
}

// deleteRows runs JobsDelete and answers how many jobs it deleted and what
// that took from the counts.
func deleteRows(ctx context.Context, tx *sql.Tx, list sql.NamedArg) (int, counts, error) {
	rows, err := tx.QueryContext(ctx, queries.Get("JobsDelete"), list)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	n, gone := 0, counts{}
	for rows.Next() {
		var queue, status string
		if err := rows.Scan(&queue, &status); err != nil {
			return 0, nil, err
		}
		gone.add(queue, lifecycle.Status(status), -1)
		n++
	}
	return n, gone, rows.Err()
}
