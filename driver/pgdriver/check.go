package pgdriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// CheckInvariants compares the sets kept beside the job rows (drover_ready,
// drover_leases, drover_finished) with the job rows, and returns an error naming
// each disagreement, or nil. It reads every job, so it is for tests and for an
// operator's diagnosis, not for a hot path. Under concurrent claims and cancels a
// ready row may briefly name a job that is no longer claimable (see JobCancel in
// queries/job.sql); on a quiet database every line it reports is a bug.
func (d *Driver) CheckInvariants(ctx context.Context) error {
	rows, err := d.pool.Query(ctx, queries.Get("CheckSets"))
	if err != nil {
		return fmt.Errorf("check invariants: %w", err)
	}
	problems, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("check invariants: %w", err)
	}
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = errors.New(p)
	}
	return errors.Join(errs...)
}
