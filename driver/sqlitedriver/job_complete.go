package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// JobComplete moves running → succeeded with Result (nil is stored as JSON null).
func (d *Driver) JobComplete(ctx context.Context, p driver.CompleteParams) (*driver.Job, error) {
	f, err := completion(p)
	if err != nil {
		return nil, err
	}
	return d.fence(ctx, p.FenceParams, f)
}

// JobCompleteMany applies completions in one transaction. Each is fenced on its
// own: a lost lease fails that outcome only. A database error aborts the
// transaction, and every outcome that had not failed on its own reports it.
func (d *Driver) JobCompleteMany(ctx context.Context, params []driver.CompleteParams) []driver.JobOutcome {
	out := make([]driver.JobOutcome, len(params))
	fences := make([]driver.FenceParams, len(params))
	fs := make([]fenced, len(params))
	for i, p := range params {
		fences[i] = p.FenceParams
		fs[i], out[i].Err = completion(p)
	}
	d.batch(ctx, "complete", fences, fs, out)
	return out
}

// JobStartMany applies many starts in one write transaction, each fenced on its own.
func (d *Driver) JobStartMany(ctx context.Context, params []driver.FenceParams) []driver.JobOutcome {
	out := make([]driver.JobOutcome, len(params))
	fs := make([]fenced, len(params))
	for i, p := range params {
		fs[i] = fenced{
			verb:  "start",
			query: "JobStart",
			ops:   []lifecycle.Op{lifecycle.OpStart},
			args:  []any{sql.Named("lease_us", p.LeaseDuration.Microseconds())},
		}
	}
	d.batch(ctx, "start", params, fs, out)
	return out
}

// batch applies fenced transitions in one write transaction. A fence error
// rejects that job only; any other error rolls the whole batch back and is
// reported for every job not already rejected.
func (d *Driver) batch(ctx context.Context, verb string, params []driver.FenceParams, fs []fenced, out []driver.JobOutcome) {
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		for i, p := range params {
			if out[i].Err != nil {
				continue
			}
			j, err := applyFenced(ctx, tx, p, fs[i])
			if err != nil && !isFenceError(err) {
				return err
			}
			out[i] = driver.JobOutcome{Job: j, Err: err}
		}
		return nil
	})
	if err != nil {
		for i := range out {
			if out[i].Err == nil || !isFenceError(out[i].Err) {
				out[i] = driver.JobOutcome{Err: fmt.Errorf("%s job %d: %w", verb, params[i].ID, err)}
			}
		}
	}
}

// isFenceError reports an error that rejects one call without harming the
// transaction it ran in.
func isFenceError(err error) bool {
	return errors.Is(err, driver.ErrLeaseLost) || errors.Is(err, driver.ErrNotFound)
}

func completion(p driver.CompleteParams) (fenced, error) {
	result := "null"
	if len(p.Result) > 0 {
		if !json.Valid(p.Result) {
			return fenced{}, fmt.Errorf("complete job %d: %w", p.ID, driver.Invalid("result", "is not valid JSON"))
		}
		result = string(p.Result)
	}
	return fenced{
		verb:  "complete",
		query: "JobComplete",
		ops:   []lifecycle.Op{lifecycle.OpComplete},
		args:  []any{sql.Named("result", result)},
	}, nil
}
