package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/drover-dev/drover/driver"
)

// JobGet returns the job with id, or ErrNotFound.
func (d *Driver) JobGet(ctx context.Context, id int64) (*driver.Job, error) {
	j, err := getJob(ctx, d.read, id)
	if err != nil {
		return nil, err
	}
	if j == nil {
		return nil, fmt.Errorf("job %d: %w", id, driver.ErrNotFound)
	}
	return j, nil
}

// getJob reads one job; nil, nil if it does not exist.
func getJob(ctx context.Context, q querier, id int64) (*driver.Job, error) {
	j, err := queryJob(ctx, q, queries.Get("JobGet"), sql.Named("id", id))
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return j, nil
}

// mustGetJob reads one job inside a transition; ErrNotFound (wrapped with verb) if
// it does not exist.
func mustGetJob(ctx context.Context, q querier, verb string, id int64) (*driver.Job, error) {
	j, err := getJob(ctx, q, id)
	if err != nil {
		return nil, err
	}
	if j == nil {
		return nil, fmt.Errorf("%s job %d: %w", verb, id, driver.ErrNotFound)
	}
	return j, nil
}

// JobList returns jobs matching the filters, ordered by id (descending unless
// Ascending), at most Limit (default 100), after AfterID when set; with
// MaxBytes, it steps no further than the job that goes over (ListParams).
func (d *Driver) JobList(ctx context.Context, p driver.ListParams) ([]*driver.Job, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = driver.DefaultListLimit
	}
	name := "JobListDesc"
	if p.Ascending {
		name = "JobListAsc"
	}
	bytes := 0
	full := func(jobs []*driver.Job) bool {
		bytes += driver.JobBytes(jobs[len(jobs)-1])
		return driver.ListFull(p, len(jobs), bytes)
	}
	jobs, err := queryJobsUntil(ctx, d.read, full, queries.Get(name),
		sql.Named("statuses", jsonList(p.Statuses)),
		sql.Named("queue", p.Queue),
		sql.Named("kind", p.Kind),
		sql.Named("after_id", p.AfterID),
		sql.Named("limit", limit),
	)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	if jobs == nil {
		jobs = []*driver.Job{}
	}
	return jobs, nil
}
