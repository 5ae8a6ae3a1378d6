package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// JobInsertMany inserts jobs in one transaction; see driver.Driver. Jobs whose
// idempotency key exists already (in the table or earlier in params) come back
// with Existing = true.
func (d *Driver) JobInsertMany(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	var results []driver.InsertResult
	var now time.Time
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		now = time.Now().UTC() // once the write lock is held: created_at keeps the log's order
		var err error
		results, err = insertMany(ctx, tx, params, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	d.publishReady(results, now)
	return results, nil
}

// JobInsertManyTx is JobInsertMany inside the caller's *sql.Tx (begun on DB()):
// the jobs exist iff it commits. The wake-up cannot wait for that commit, so it
// is published at once; a premature wake-up only makes a worker poll early.
func (d *Driver) JobInsertManyTx(ctx context.Context, tx any, params []driver.InsertParams) ([]driver.InsertResult, error) {
	sqlTx, ok := tx.(*sql.Tx)
	if !ok || sqlTx == nil {
		return nil, driver.Invalid("tx", "the SQLite driver needs a *sql.Tx begun on its DB(), got %T", tx)
	}
	// A transaction on another file (another installation's database) put
	// the jobs in its tables, where this driver's workers never looked.
	if d.file != "" {
		var file string
		if err := sqlTx.QueryRowContext(ctx, mainFileQuery).Scan(&file); err != nil {
			return nil, fmt.Errorf("insert %d jobs: %w", len(params), err)
		}
		if file != d.file {
			return nil, driver.Invalid("tx", "it is on the database %q, the driver on %q: begin it on the driver's DB()", file, d.file)
		}
	}
	now := time.Now().UTC()
	// insertMany runs several statements, and a failed one does not end a
	// SQLite transaction (a canceled context can even fail a statement that
	// ran): under a savepoint, a call that fails leaves nothing in the
	// caller's transaction, which may still commit its own work.
	if _, err := sqlTx.ExecContext(ctx, "SAVEPOINT drover_insert"); err != nil {
		return nil, fmt.Errorf("insert %d jobs: %w", len(params), err)
	}
	results, err := insertMany(ctx, sqlTx, params, now)
	after := context.WithoutCancel(ctx) // the savepoint ends whatever became of ctx
	if err == nil {
		if _, err = sqlTx.ExecContext(after, "RELEASE drover_insert"); err == nil {
			d.publishReady(results, now)
			return results, nil
		}
		err = fmt.Errorf("insert %d jobs: %w", len(params), err)
	}
	if _, rerr := sqlTx.ExecContext(after, "ROLLBACK TO drover_insert"); rerr != nil {
		return nil, fmt.Errorf("%w (and undoing it failed: %v; roll the transaction back)", err, rerr)
	}
	_, _ = sqlTx.ExecContext(after, "RELEASE drover_insert")
	return nil, err
}

// insertMany inserts params with one INSERT … SELECT per chunk; each row
// records its own enqueue event (enqueued_by). Only jobs whose idempotency key
// exists already cost a statement each, to read the job that holds it.
func insertMany(ctx context.Context, tx *sql.Tx, params []driver.InsertParams, now time.Time) ([]driver.InsertResult, error) {
	results := make([]driver.InsertResult, 0, len(params))
	if len(params) == 0 {
		return results, nil
	}
	vals := make([]any, 0, 15*len(params))
	stored := make([]*driver.Job, len(params)) // each job as its row will hold it
	for i := range params {
		p := &params[i]
		status := lifecycle.StatusQueued
		if p.WorkflowRunID != nil {
			status = lifecycle.StatusPending
		}
		runAt := now
		if p.RunAt != nil {
			runAt = p.RunAt.UTC()
		}
		args := string(p.Args)
		if len(p.Args) == 0 {
			args = "{}"
		}
		actor := p.Actor
		if actor == "" {
			actor = actorClient
		}
		vals = append(vals, i, p.Kind, p.Queue, string(status), args, nullJSON(p.Metadata), p.Priority, micros(runAt),
			p.MaxAttempts, p.Timeout.Milliseconds(), nullString(p.IdempotencyKey), nullInt(p.RetryOf),
			nullInt(p.WorkflowRunID), nullString(p.WorkflowNode), actor)
		stored[i] = insertedJob(p, status, runAt, args, now)
	}
	insert := batchStmt{name: "JobInsertMany", cols: 15, scalars: []any{micros(now)}}
	var inserted []insertedRow
	err := insert.chunks(vals, func(q string, args []any) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r insertedRow
			var key sql.NullString
			if err := rows.Scan(&r.id, &key); err != nil {
				return err
			}
			r.key = key.String
			inserted = append(inserted, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("insert %d jobs: %w", len(params), err)
	}
	sort.Slice(inserted, func(i, j int) bool { return inserted[i].id < inserted[j].id })
	k := 0
	for i := range params {
		p := &params[i]
		if k < len(inserted) && inserted[k].key == p.IdempotencyKey {
			j := stored[i]
			j.ID = inserted[k].id
			results = append(results, driver.InsertResult{Job: j})
			k++
			continue
		}
		// Only an idempotency key conflict inserts nothing without an error.
		if p.IdempotencyKey == "" {
			return nil, fmt.Errorf("insert job %d of %d (kind %q): no row came back", i+1, len(params), p.Kind)
		}
		results = append(results, driver.InsertResult{Existing: true})
	}
	if k != len(inserted) {
		return nil, fmt.Errorf("insert %d jobs: %d rows came back for %d inserted", len(params), len(inserted), k)
	}
	added := counts{}
	for _, r := range results {
		if !r.Existing {
			added.add(r.Job.Queue, r.Job.Status, 1)
		}
	}
	if err := added.write(ctx, tx); err != nil {
		return nil, fmt.Errorf("insert %d jobs: %w", len(params), err)
	}
	// Read existing jobs after the insert: a key first used earlier in this
	// batch names a job inserted above.
	for i := range results {
		if !results[i].Existing {
			continue
		}
		p := &params[i]
		existing, err := queryJob(ctx, tx, queries.Get("JobGetByIdempotencyKey"), sql.Named("idempotency_key", p.IdempotencyKey))
		if err != nil {
			return nil, fmt.Errorf("insert job %d of %d (kind %q): %w", i+1, len(params), p.Kind, err)
		}
		if existing == nil {
			return nil, fmt.Errorf("insert job %d of %d (kind %q): idempotency key %q conflicted but no job holds it", i+1, len(params), p.Kind, p.IdempotencyKey)
		}
		results[i].Job = existing
	}
	return results, nil
}

// insertedRow is what JobInsertMany answers of a row it inserted.
type insertedRow struct {
	id  int64
	key string // idempotency_key, "" for none
}

// insertedJob is the job JobInsertMany's row for p holds, but its id: the
// values the statement binds (times in whole microseconds, the timeout in whole
// milliseconds, metadata and the idempotency key NULL when empty), and the
// columns' defaults for the rest (attempt and executions 0, errors '[]', rev 1;
// migrations/001_init.up.sql). The conformance suite compares every inserted
// job with JobGet's.
func insertedJob(p *driver.InsertParams, status lifecycle.Status, runAt time.Time, args string, now time.Time) *driver.Job {
	j := &driver.Job{
		Kind:           p.Kind,
		Queue:          p.Queue,
		Status:         status,
		Args:           json.RawMessage(args),
		Priority:       p.Priority,
		RunAt:          fromMicros(micros(runAt)),
		MaxAttempts:    p.MaxAttempts,
		Timeout:        time.Duration(p.Timeout.Milliseconds()) * time.Millisecond,
		IdempotencyKey: p.IdempotencyKey,
		Errors:         []driver.AttemptError{},
		CreatedAt:      fromMicros(micros(now)),
		Rev:            1,
		WorkflowNode:   p.WorkflowNode,
	}
	if len(p.Metadata) > 0 {
		j.Metadata = json.RawMessage(string(p.Metadata))
	}
	if p.RetryOf != nil {
		id := *p.RetryOf
		j.RetryOf = &id
	}
	if p.WorkflowRunID != nil {
		id := *p.WorkflowRunID
		j.WorkflowRunID = &id
	}
	return j
}

// publishReady wakes workers of the queues that got a job claimable now.
func (d *Driver) publishReady(results []driver.InsertResult, now time.Time) {
	var queues []string
	seen := map[string]bool{}
	for _, r := range results {
		j := r.Job
		if r.Existing || j.Status != lifecycle.StatusQueued || j.RunAt.After(now) || seen[j.Queue] {
			continue
		}
		seen[j.Queue] = true
		queues = append(queues, j.Queue)
	}
	d.wake.publish(queues)
}
