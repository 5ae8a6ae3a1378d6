package sqlitedriver

import (
	"context"
	"database/sql"
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
// transaction, and every outcome but those refused before it (an invalid
// result) reports it.
func (d *Driver) JobCompleteMany(ctx context.Context, params []driver.CompleteParams) []driver.JobOutcome {
	return d.completeMany(ctx, params, false)
}

// JobCompleteManyErrs is JobCompleteMany whose batch UPDATE answers only the
// ids it completed, not their rows.
func (d *Driver) JobCompleteManyErrs(ctx context.Context, params []driver.CompleteParams) []error {
	return driver.OutcomeErrs(d.completeMany(ctx, params, true))
}

// completeMany applies the completions; with idsOnly the outcomes of the jobs
// the batch statements completed carry no job.
func (d *Driver) completeMany(ctx context.Context, params []driver.CompleteParams, idsOnly bool) []driver.JobOutcome {
	out := make([]driver.JobOutcome, len(params))
	fences := make([]driver.FenceParams, len(params))
	fs := make([]fenced, len(params))
	args := make([]any, len(params))
	for i, p := range params {
		fences[i] = p.FenceParams
		fs[i], out[i].Err = completion(p)
		if out[i].Err == nil {
			if err := driver.CheckRequestID(p.RequestID); err != nil {
				out[i].Err = fmt.Errorf("complete job %d: %w", p.ID, err) // refused alone, as PostgreSQL's
			}
		}
		if out[i].Err == nil {
			args[i] = fs[i].args[0].(sql.NamedArg).Value // the result text
		}
	}
	d.batch(ctx, fences, fs, out, batchSet{
		op: lifecycle.OpComplete, from: lifecycle.StatusRunning, to: lifecycle.StatusSucceeded,
		events: "JobCompleteManyEvents", update: "JobCompleteMany", args: args, idsOnly: idsOnly,
		eventsNeedRequestID: true,
	})
	return out
}

// JobStartMany applies many starts in one write transaction, each fenced on its own.
// A request_id with a NUL is refused alone, as PostgreSQL's driver refuses it.
func (d *Driver) JobStartMany(ctx context.Context, params []driver.FenceParams) []driver.JobOutcome {
	out := make([]driver.JobOutcome, len(params))
	fs := make([]fenced, len(params))
	args := make([]any, len(params))
	for i, p := range params {
		if err := driver.CheckRequestID(p.RequestID); err != nil {
			out[i].Err = fmt.Errorf("start job %d: %w", p.ID, err)
		}
		fs[i] = fenced{
			verb:  "start",
			query: "JobStart",
			ops:   []lifecycle.Op{lifecycle.OpStart},
			args:  []any{sql.Named("lease_us", p.LeaseDuration.Microseconds())},
		}
		args[i] = p.LeaseDuration.Microseconds()
	}
	d.batch(ctx, params, fs, out, batchSet{
		op: lifecycle.OpStart, from: lifecycle.StatusClaimed, to: lifecycle.StatusRunning,
		events: "JobStartManyEvents", update: "JobStartMany", args: args,
	})
	return out
}

// batchSet is the set-based form of one kind of fenced transition: an event
// INSERT and a guarded UPDATE that each take a row per job (see
// queries/lease.sql), with one argument per job besides its fence.
type batchSet struct {
	op             lifecycle.Op
	from, to       lifecycle.Status
	events, update string // statement names
	args           []any  // per job, in params order
	idsOnly        bool   // the UPDATE answers ids only: moved jobs' outcomes carry no job
	// eventsNeedRequestID: the event INSERT writes only jobs with a
	// request_id (a completion without one keeps its event in the row), so
	// a set with none skips it rather than bind six values a job for nothing.
	eventsNeedRequestID bool
}

// batch applies fenced transitions in one write transaction. The first mention
// of each job goes through set's two statements; every other call (a repeated
// job) and every job those statements left alone (a guard that did not hold, a
// request_id already in the job's log) then runs on its own through
// applyFenced, in input order, which tells a missing job from a lost lease and
// answers a replay. A fence error rejects
// that job only; any other error rolls the whole batch back and is reported
// for every job not refused before the transaction, as pgdriver's batch
// answers: a refusal made inside it may rest on what the rollback took back
// (a job named twice is lease lost at its second mention because its first
// completed it), and so is no longer the truth.
func (d *Driver) batch(ctx context.Context, params []driver.FenceParams, fs []fenced, out []driver.JobOutcome, set batchSet) {
	if len(params) == 0 {
		return
	}
	verb := fs[0].verb
	refused := make([]bool, len(out)) // before the transaction, on its own
	for i := range out {
		refused[i] = out[i].Err != nil
	}
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		done, moved, err := applySet(ctx, tx, params, out, set)
		if err != nil {
			return err
		}
		for i, p := range params {
			if out[i].Err != nil || moved[i] {
				out[i].Job = done[i]
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
			if !refused[i] {
				out[i] = driver.JobOutcome{Err: fmt.Errorf("%s job %d: %w", verb, params[i].ID, err)}
			}
		}
	}
}

// applySet runs set's statements for the calls it may take and returns, by
// input position, whether they moved the job and, unless set.idsOnly, the job.
func applySet(ctx context.Context, tx *sql.Tx, params []driver.FenceParams, out []driver.JobOutcome, set batchSet) (done []*driver.Job, moved []bool, err error) {
	done, moved = make([]*driver.Job, len(params)), make([]bool, len(params))
	t, ok := lifecycle.Lookup(set.op, set.from, set.to)
	if !ok {
		return nil, nil, lifecycle.Check(set.op, set.from, set.to)
	}
	pos := make(map[int64]int, len(params)) // job id → the input position set takes
	vals := make([]any, 0, 6*len(params))
	requests := false
	for i, p := range params {
		if out[i].Err != nil {
			continue
		}
		if _, dup := pos[p.ID]; dup {
			continue
		}
		pos[p.ID] = i
		vals = append(vals, p.ID, p.Attempt, driver.CanonicalToken(p.LeaseToken), micros(clock(p.Now)), set.args[i], nullString(p.RequestID))
		requests = requests || p.RequestID != ""
	}
	if len(vals) == 0 {
		return done, moved, nil
	}
	if requests || !set.eventsNeedRequestID {
		if err := (batchStmt{name: set.events, cols: 6, scalars: []any{string(t.Event)}}).exec(ctx, tx, vals); err != nil {
			return nil, nil, fmt.Errorf("append %s events: %w", t.Event, err)
		}
	}
	update := batchStmt{name: set.update, cols: 6, idsOnly: set.idsOnly}
	c := counts{}
	if set.idsOnly {
		ids, queues, err := update.queryIDs(ctx, tx, vals)
		if err != nil {
			return nil, nil, err
		}
		for i, id := range ids {
			moved[pos[id]] = true
			c.move(queues[i], set.from, set.to)
		}
		return done, moved, c.write(ctx, tx)
	}
	jobs, err := update.queryJobs(ctx, tx, vals)
	if err != nil {
		return nil, nil, err
	}
	for _, j := range jobs {
		done[pos[j.ID]], moved[pos[j.ID]] = j, true
		c.move(j.Queue, set.from, set.to)
	}
	return done, moved, c.write(ctx, tx)
}

// isFenceError reports an error that rejects one call without harming the
// transaction it ran in. (The invalid argument applyFenced can answer is a
// request_id of another attempt, found before anything is written.)
func isFenceError(err error) bool {
	return errors.Is(err, driver.ErrLeaseLost) || errors.Is(err, driver.ErrNotFound) ||
		errors.Is(err, driver.ErrInvalidArgument)
}

func completion(p driver.CompleteParams) (fenced, error) {
	result := "null"
	if err := driver.CheckResult(p.Result); err != nil {
		return fenced{}, fmt.Errorf("complete job %d: %w", p.ID, err)
	}
	if len(p.Result) > 0 {
		result = string(driver.WriteNumbersOut(p.Result)) // as PostgreSQL's jsonb keeps it
	}
	return fenced{
		verb:     "complete",
		query:    "JobComplete",
		ops:      []lifecycle.Op{lifecycle.OpComplete},
		args:     []any{sql.Named("result", result), sql.Named("request_id", p.RequestID)},
		rowEvent: p.RequestID == "",
	}, nil
}
