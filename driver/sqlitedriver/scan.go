package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// jobRow receives one drover_jobs row. Columns are matched by name, so the
// queries may say SELECT * / RETURNING * and a later migration may add columns.
type jobRow struct {
	id, priority, runAt, attempt, executions, maxAttempts, timeoutMS, createdAt, rev int64
	kind, queue, status, args, errors                                                string
	metadata, idempotencyKey, owner, leaseToken, result, errText, workflowNode       sql.NullString
	leaseExpiresAt, startedAt, finishedAt, retryOf, workflowRunID                    sql.NullInt64
}

func (r *jobRow) dest(col string) any {
	switch col {
	case "id":
		return &r.id
	case "kind":
		return &r.kind
	case "queue":
		return &r.queue
	case "status":
		return &r.status
	case "args":
		return &r.args
	case "metadata":
		return &r.metadata
	case "priority":
		return &r.priority
	case "run_at":
		return &r.runAt
	case "attempt":
		return &r.attempt
	case "executions":
		return &r.executions
	case "max_attempts":
		return &r.maxAttempts
	case "timeout_ms":
		return &r.timeoutMS
	case "idempotency_key":
		return &r.idempotencyKey
	case "owner":
		return &r.owner
	case "lease_token":
		return &r.leaseToken
	case "lease_expires_at":
		return &r.leaseExpiresAt
	case "result":
		return &r.result
	case "error":
		return &r.errText
	case "errors":
		return &r.errors
	case "created_at":
		return &r.createdAt
	case "started_at":
		return &r.startedAt
	case "finished_at":
		return &r.finishedAt
	case "rev":
		return &r.rev
	case "retry_of":
		return &r.retryOf
	case "workflow_run_id":
		return &r.workflowRunID
	case "workflow_node":
		return &r.workflowNode
	}
	return new(any)
}

func (r *jobRow) job() (*driver.Job, error) {
	j := &driver.Job{
		ID:             r.id,
		Kind:           r.kind,
		Queue:          r.queue,
		Status:         lifecycle.Status(r.status),
		Args:           json.RawMessage(r.args),
		Priority:       int(r.priority),
		RunAt:          fromMicros(r.runAt),
		Attempt:        int(r.attempt),
		Executions:     int(r.executions),
		MaxAttempts:    int(r.maxAttempts),
		Timeout:        time.Duration(r.timeoutMS) * time.Millisecond,
		IdempotencyKey: r.idempotencyKey.String,
		Owner:          r.owner.String,
		LeaseToken:     r.leaseToken.String,
		LeaseExpiresAt: optTime(r.leaseExpiresAt),
		Error:          r.errText.String,
		CreatedAt:      fromMicros(r.createdAt),
		StartedAt:      optTime(r.startedAt),
		FinishedAt:     optTime(r.finishedAt),
		Rev:            r.rev,
		RetryOf:        optInt(r.retryOf),
		WorkflowRunID:  optInt(r.workflowRunID),
		WorkflowNode:   r.workflowNode.String,
	}
	if r.metadata.Valid {
		j.Metadata = json.RawMessage(r.metadata.String)
	}
	if r.result.Valid {
		j.Result = json.RawMessage(r.result.String)
	}
	var err error
	if j.Errors, err = driver.DecodeAttemptErrors(r.errors); err != nil {
		return nil, fmt.Errorf("job %d: decode errors: %w", r.id, err)
	}
	return j, nil
}

// queryJobs runs a statement that returns job rows.
func queryJobs(ctx context.Context, q querier, query string, args ...any) ([]*driver.Job, error) {
	return queryJobsUntil(ctx, q, nil, query, args...)
}

// queryJobsUntil is queryJobs that reads no row after the one for which
// full, if set, answers true (it is given the jobs read so far).
func queryJobsUntil(ctx context.Context, q querier, full func([]*driver.Job) bool, query string, args ...any) ([]*driver.Job, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var r jobRow
	dest := make([]any, len(cols))
	for i, c := range cols {
		dest[i] = r.dest(c)
	}
	var jobs []*driver.Job
	for rows.Next() {
		r = jobRow{}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		j, err := r.job()
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
		if full != nil && full(jobs) {
			break // rows.Close steps no further
		}
	}
	return jobs, rows.Err()
}

// queryJob runs a statement that returns at most one job row; nil if none.
func queryJob(ctx context.Context, q querier, query string, args ...any) (*driver.Job, error) {
	jobs, err := queryJobs(ctx, q, query, args...)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	return jobs[0], nil
}

func optTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

func optInt(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	n := v.Int64
	return &n
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func nullJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return string(raw)
}

// jsonList encodes a list for json_each(?) so IN lists stay in static SQL.
func jsonList[T any](xs []T) string {
	if len(xs) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(xs)
	return string(b)
}
