package pgdriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/driver"
)

// CheckInvariants compares the sets kept beside the job rows (drover_ready,
// drover_leases, drover_finished) and the job counts (drover_job_counts and its
// changes, once migration 017 made them) with the job rows, and returns an
// error naming each disagreement, or nil. It reads every job, so it is for
// tests and for an operator's diagnosis, not for a hot path. Under concurrent
// claims and cancels a ready row may briefly name a job that is no longer
// claimable (see JobCancel in queries/job.sql); on a quiet database every line
// it reports is a bug.
func (d *Driver) CheckInvariants(ctx context.Context) error {
	checks := []string{"CheckSets"}
	var counted bool
	if err := d.pool.QueryRow(ctx, "SELECT to_regclass('drover_job_counts') IS NOT NULL").Scan(&counted); err != nil {
		return fmt.Errorf("check invariants: %w", err)
	}
	if counted {
		checks = append(checks, "CheckCounts")
	}
	var errs []error
	for _, name := range checks {
		rows, err := d.pool.Query(ctx, queries.Get(name))
		if err != nil {
			return fmt.Errorf("check invariants: %w", err)
		}
		problems, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("check invariants: %w", err)
		}
		for _, p := range problems {
			errs = append(errs, errors.New(p))
		}
	}
	return errors.Join(errs...)
}

var _ driver.Repairer = (*Driver)(nil)

// RepairStep implements driver.Repairer. Among the limit jobs after id after, it
// gives each claimable job that has no drover_ready row its row, and each job
// whose lease expired with no drover_leases row covering it a lease row, so the
// reaper reaps it. It says so in the log: on a database that only this version
// writes to, neither ever happens.
func (d *Driver) RepairStep(ctx context.Context, after int64, limit int) (int64, int, error) {
	var last *int64
	var read, ready, leased int
	if err := d.pool.QueryRow(ctx, queries.Get("ReadyRepair"), after, limit).Scan(&last, &read, &ready, &leased); err != nil {
		return after, 0, fmt.Errorf("repair the ready and lease sets: %w", err)
	}
	if ready > 0 {
		d.log.Warn("claimable jobs had no drover_ready row and were given one; is a Drover older than migration 006 writing to this database?",
			"jobs", ready, "after_id", after)
	}
	if leased > 0 {
		d.log.Warn("jobs whose lease expired had no drover_leases row and were given one, so the reaper requeues them; is a Drover older than migration 006 claiming from this database?",
			"jobs", leased, "after_id", after)
	}
	if last == nil || read < limit {
		return 0, ready + leased, nil
	}
	return *last, ready + leased, nil
}
