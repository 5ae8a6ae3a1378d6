package pgdriver

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// JobGet implements driver.Driver.
func (d *Driver) JobGet(ctx context.Context, id int64) (*driver.Job, error) {
	rows, err := d.pool.Query(ctx, queries.Get("JobGet"), id)
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	j, err := collectOne(rows)
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	if j == nil {
		return nil, fmt.Errorf("job %d: %w", id, driver.ErrNotFound)
	}
	return j, nil
}

// jobListFailed is JobList for the failed jobs alone (the DLQ): it names the
// DLQ index's predicate, error IS NOT NULL, which holds exactly for failed jobs
// (drover_jobs_error_only_when_failed), so the planner can read that index.
var jobListFailed = queryVariant("JobList", "WHERE (cardinality", "WHERE error IS NOT NULL AND (cardinality")

// JobList implements driver.Driver. With MaxBytes it reads no row past the
// job that goes over (driver.ListParams).
func (d *Driver) JobList(ctx context.Context, p driver.ListParams) ([]*driver.Job, error) {
	statuses := make([]string, len(p.Statuses))
	for i, s := range p.Statuses {
		statuses[i] = string(s)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = driver.DefaultListLimit
	}
	query := queries.Get("JobList")
	if len(statuses) == 1 && statuses[0] == string(lifecycle.StatusFailed) {
		query = jobListFailed
	}
	// A listing that MaxBytes ends before its last row cancels its query
	// rather than read the rest: to keep the connection, pgx would receive
	// every row still to come and drop it (a thousand jobs of 1 MiB args is
	// a gigabyte). The connection of a canceled query is closed, and the
	// pool opens another when it needs one.
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rows, err := d.pool.Query(qctx, query, statuses, p.Queue, p.Kind, p.AfterID, limit, p.Ascending)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs, bytes := []*driver.Job{}, 0
	err = scanJobRows(rows, func(_ *jobRow, j *driver.Job) bool {
		jobs = append(jobs, j)
		bytes += driver.JobBytes(j)
		if len(jobs) < limit && driver.ListFull(p, len(jobs), bytes) {
			cancel() // before scanJobRows closes rows
			return false
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// JobEvents implements driver.Driver.
func (d *Driver) JobEvents(ctx context.Context, id int64) ([]lifecycle.Event, error) {
	rows, err := d.pool.Query(ctx, queries.Get("JobEvents"), id)
	if err != nil {
		return nil, fmt.Errorf("events of job %d: %w", id, err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lifecycle.Event, error) {
		var e lifecycle.Event
		var typ, from, to string
		err := r.Scan(&e.JobID, &e.Seq, &typ, &from, &to, &e.At, &e.Actor, &e.RequestID, &e.Attempt)
		e.Type, e.From, e.To, e.At = lifecycle.EventType(typ), lifecycle.Status(from), lifecycle.Status(to), e.At.UTC()
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("events of job %d: %w", id, err)
	}
	if len(evs) == 0 { // every job has its enqueue event: is there a job at all?
		if _, _, err := d.jobStatus(ctx, d.pool, id); err != nil {
			return nil, fmt.Errorf("events of job %d: %w", id, err)
		}
	}
	return evs, nil
}
