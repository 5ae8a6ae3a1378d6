package pgdriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// leaseTidyRows bounds the drover_leases rows one reaper pass tidies: a claim
// writes one row for up to its whole limit of jobs, so a thousand rows cover
// far more than a second of claims.
const leaseTidyRows = 1000

// JobReapExpired implements driver.Driver.
func (d *Driver) JobReapExpired(ctx context.Context, p driver.ReapParams) ([]*driver.Job, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	// Due lease rows whose jobs all finished would crowd out the ones with an
	// expired job: tidy them first, all of them. A batch that tidies every row
	// it read may be followed by more such rows; one that leaves some leaves
	// rows with an expired job, which come before the rest and which the reap
	// below reads. One batch a call left the reap reading only finished
	// claims' rows behind more than 1,100 of them, answering none, and the
	// engine's pass ended there: an expired job waited a pass per 1,000 rows
	// due before its own, for ever while claims came faster than that.
	for {
		var tidied int
		if err := d.pool.QueryRow(ctx, queries.Get("LeaseTidy"), nowArg(p.Now), leaseTidyRows).Scan(&tidied); err != nil {
			return nil, fmt.Errorf("reap expired leases: tidy the lease rows: %w", err)
		}
		if tidied < leaseTidyRows {
			break
		}
	}
	var jobs []*driver.Job
	rows, err := d.pool.Query(ctx, queries.Get("JobReapExpired"), limit, nowArg(p.Now))
	if err == nil {
		jobs, err = collectJobs(rows)
	}
	var reapErr error
	if err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || ctx.Err() != nil {
			return nil, fmt.Errorf("reap expired leases: %w", err)
		}
		// The database refused the statement, maybe for one job's sake:
		// reap them one at a time, so that job holds up no other.
		jobs, reapErr = d.reapEach(ctx, limit, p.Now)
	}
	ready := map[string]bool{}
	for _, j := range jobs {
		if j.Status == lifecycle.StatusQueued {
			ready[j.Queue] = true
		}
	}
	if len(ready) > 0 {
		_ = d.WakeupPublish(ctx, keysOf(ready))
	}
	return jobs, reapErr
}

// reapOneQuery is JobReapExpired for job $3 alone (reapEach).
var reapOneQuery = queryVariant("JobReapExpired", "WHERE id = ANY (ARRAY(SELECT id FROM due))", "WHERE id = $3::bigint")

// reapEach reaps the jobs JobReapExpired's statement reads, a statement each,
// after the database refused that statement. Its reap of all of them was
// one statement, and a job whose own reap the database refuses (an error
// history past the 256 MB a jsonb holds) failed it whole; that job's lease
// expired before the others', so every later call met it first again, and
// no other expired lease was ever reaped. A job refused on its own is left as
// it is and named in the *driver.ReapRefusedError answered with the rest.
func (d *Driver) reapEach(ctx context.Context, limit int, now *time.Time) ([]*driver.Job, error) {
	jobs := []*driver.Job{}
	var refused driver.ReapRefusedError
	// Refused jobs stay the earliest expired, so each page reads past those
	// refused before it, until limit jobs are reaped or no expired lease is
	// left: read again from the start, the refused jobs filled every call
	// (100 lease rows of them, or limit jobs), and no other expired lease was
	// reaped again.
	for len(jobs) < limit {
		skip := append([]int64{}, refused.IDs...) // not nil: NULL would match no row
		rows, err := d.pool.Query(ctx, queries.Get("JobReapCandidates"), limit-len(jobs), nowArg(now), skip)
		if err != nil {
			return jobs, fmt.Errorf("reap expired leases: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return jobs, fmt.Errorf("reap expired leases: %w", err)
		}
		before := len(refused.IDs)
		for _, id := range ids {
			rows, err := d.pool.Query(ctx, reapOneQuery, limit, nowArg(now), id)
			var one []*driver.Job
			if err == nil {
				one, err = collectJobs(rows)
			}
			if err != nil {
				var pgErr *pgconn.PgError
				if !errors.As(err, &pgErr) || ctx.Err() != nil {
					return jobs, fmt.Errorf("reap expired leases: job %d: %w", id, err)
				}
				refused.IDs, refused.Errs = append(refused.IDs, id), append(refused.Errs, err)
				continue
			}
			jobs = append(jobs, one...)
		}
		if len(refused.IDs) == before {
			break // a page reaped in full: limit reached, or none left
		}
	}
	if len(refused.IDs) > 0 {
		return jobs, &refused
	}
	return jobs, nil
}

// JobDeleteFinished implements driver.Driver. It goes on, a transaction a
// batch, until it has deleted limit jobs or read the last drover_finished row
// past the cutoff: the engine takes an answer short of the limit for the end of
// retention's work until its next pass. A batch can delete fewer jobs than it
// read rows: a DLQ purge deletes failed jobs but leaves their rows, which only
// retention tidies; a batch of 1,000 such rows answered 0, and after a purge of
// a million failed jobs retention moved on by 1,000 rows a minute.
func (d *Driver) JobDeleteFinished(ctx context.Context, p driver.DeleteFinishedParams) (int, error) {
	if err := p.Check(); err != nil {
		return 0, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var before *time.Time
	if !p.Before.IsZero() {
		before = &p.Before
	}
	total := 0
	for total < limit {
		batch := limit - total
		var n int
		var rows []int64
		var tidied int64
		err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, queries.Get("JobDeleteFinished"), before, batch, p.OlderThan.Microseconds()).Scan(&n, &rows); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, queries.Get("FinishedTidy"), rows)
			tidied = tag.RowsAffected()
			return err
		})
		if err != nil {
			return total, fmt.Errorf("delete finished jobs: %w", err)
		}
		total += n
		// Fewer rows than asked for: none is left past the cutoff (but
		// those another call holds). A batch that neither deleted nor tidied
		// anything would find the same rows again.
		if len(rows) < batch || (n == 0 && tidied == 0) {
			break
		}
	}
	return total, nil
}

// JobDLQRequeue implements driver.Driver. The failed row is locked first, so
// two requeues of one job take turns and the second answers the first's job.
// That needs READ COMMITTED, whatever the database's default: under REPEATABLE
// READ the second's look-up would not see the first's job, and both would
// insert one.
func (d *Driver) JobDLQRequeue(ctx context.Context, p driver.DLQRequeueParams) (*driver.Job, error) {
	actor := p.Actor
	if actor == "" {
		actor = "operator"
	}
	var j *driver.Job
	var refused error // the job is missing or not failed
	err := pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var failed bool
		err := tx.QueryRow(ctx, queries.Get("JobDLQLock"), p.ID).Scan(&failed)
		if err != nil && !isNoRows(err) {
			return err
		}
		if !failed { // diagnose tells a missing job from one in another status
			_, err := d.diagnose(ctx, tx, callOf("DLQ requeue"), p.ID, "", 0, driver.ErrInvalidTransition)
			if errors.Is(err, driver.ErrNotFound) || errors.Is(err, driver.ErrInvalidTransition) {
				refused = err
			}
			return err
		}
		rows, err := tx.Query(ctx, queries.Get("JobDLQRetry"), p.ID)
		if err != nil {
			return err
		}
		if j, err = collectOne(rows); err != nil || j != nil {
			if j != nil {
				j.Replayed = true
			}
			return err
		}
		rows, err = tx.Query(ctx, queries.Get("JobDLQRequeue"), p.ID, actor)
		if err != nil {
			return err
		}
		j, err = collectOne(rows)
		return err
	})
	switch {
	case refused != nil && errors.Is(refused, driver.ErrInvalidTransition):
		return nil, fmt.Errorf("%w (%s)", refused, driver.DLQOnlyFailed)
	case refused != nil:
		return nil, refused
	case err != nil:
		return nil, fmt.Errorf("DLQ requeue job %d: %w", p.ID, err)
	}
	if !j.Replayed {
		_ = d.WakeupPublish(ctx, []string{j.Queue})
	}
	return j, nil
}

// JobDLQPurge implements driver.Driver.
func (d *Driver) JobDLQPurge(ctx context.Context, p driver.DLQPurgeParams) (int, error) {
	var n int
	if err := d.pool.QueryRow(ctx, queries.Get("JobDLQPurge"), p.Queue).Scan(&n); err != nil {
		return 0, fmt.Errorf("purge the DLQ: %w", err)
	}
	return n, nil
}
