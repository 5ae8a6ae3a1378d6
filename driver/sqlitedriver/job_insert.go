package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// JobInsertMany inserts jobs in one transaction; see driver.Driver. Jobs whose
// idempotency key exists already (in the table or earlier in params) come back
// with Existing = true.
func (d *Driver) JobInsertMany(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	now := time.Now().UTC()
	var results []driver.InsertResult
	err := d.inTx(ctx, func(tx *sql.Tx) error {
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
	if !ok {
		return nil, fmt.Errorf("sqlitedriver: JobInsertManyTx needs a *sql.Tx, got %T", tx)
	}
	now := time.Now().UTC()
	results, err := insertMany(ctx, sqlTx, params, now)
	if err != nil {
		return nil, err
	}
	d.publishReady(results, now)
	return results, nil
}

func insertMany(ctx context.Context, tx *sql.Tx, params []driver.InsertParams, now time.Time) ([]driver.InsertResult, error) {
	results := make([]driver.InsertResult, 0, len(params))
	for i := range params {
		r, err := insertOne(ctx, tx, &params[i], now)
		if err != nil {
			return nil, fmt.Errorf("insert job %d of %d (kind %q): %w", i+1, len(params), params[i].Kind, err)
		}
		results = append(results, r)
	}
	return results, nil
}

func insertOne(ctx context.Context, tx *sql.Tx, p *driver.InsertParams, now time.Time) (driver.InsertResult, error) {
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
	j, err := queryJob(ctx, tx, queries.Get("JobInsert"),
		sql.Named("kind", p.Kind),
		sql.Named("queue", p.Queue),
		sql.Named("status", string(status)),
		sql.Named("args", args),
		sql.Named("metadata", nullJSON(p.Metadata)),
		sql.Named("priority", p.Priority),
		sql.Named("run_at", micros(runAt)),
		sql.Named("max_attempts", p.MaxAttempts),
		sql.Named("timeout_ms", p.Timeout.Milliseconds()),
		sql.Named("idempotency_key", nullString(p.IdempotencyKey)),
		sql.Named("now", micros(now)),
		sql.Named("retry_of", nullInt(p.RetryOf)),
		sql.Named("workflow_run_id", nullInt(p.WorkflowRunID)),
		sql.Named("workflow_node", nullString(p.WorkflowNode)),
	)
	if err != nil {
		return driver.InsertResult{}, err
	}
	if j == nil {
		// Only an idempotency key conflict inserts nothing without an error.
		existing, err := queryJob(ctx, tx, queries.Get("JobGetByIdempotencyKey"), sql.Named("idempotency_key", p.IdempotencyKey))
		if err != nil {
			return driver.InsertResult{}, err
		}
		if existing == nil {
			return driver.InsertResult{}, fmt.Errorf("idempotency key %q conflicted but no job holds it", p.IdempotencyKey)
		}
		return driver.InsertResult{Job: existing, Existing: true}, nil
	}
	actor := p.Actor
	if actor == "" {
		actor = actorClient
	}
	if err := appendEvent(ctx, tx, lifecycle.OpEnqueue, "", j, now, actor, ""); err != nil {
		return driver.InsertResult{}, err
	}
	return driver.InsertResult{Job: j}, nil
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
