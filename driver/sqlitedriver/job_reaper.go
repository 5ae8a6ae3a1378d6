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

// Messages the reaper records.
const (
	stalledRunningError = "lease expired while running (worker presumed dead)"
	// A running attempt whose lease ran out past its timeout outlived it: its
	// holder ran on past timeout_seconds (the heartbeat leases it no further
	// than start + timeout + one lease), or died within a lease before it.
	stalledTimeoutError = "lease expired while running past its timeout (the handler overran timeout_seconds, or its worker died)"
	stalledFailedError  = "lease expired while running; attempts exhausted"
)

// JobReapExpired is the lease reaper: up to Limit (default 1000) claimed or
// running jobs whose lease_expires_at < now go to stalled and, in the same
// transaction, back to queued at now, or to failed when a running attempt used
// up the execution budget. A stalled running attempt is recorded in the error
// history, since its handler may have done part of its work. Returns the jobs as
// they end up; their queues get a wake-up. A job whose reap the database
// refuses is left as it is (a savepoint undoes its part) and named in a
// *driver.ReapRefusedError answered with the others.
func (d *Driver) JobReapExpired(ctx context.Context, p driver.ReapParams) ([]*driver.Job, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	reaped := []*driver.Job{}
	var refused driver.ReapRefusedError
	// Paced as retention is (bulkTx): after a crash of many workers the
	// engine's pass is transaction after transaction of up to Limit jobs
	// (~95 ms for 1,000), and another process's heartbeats and claims
	// waited in the busy handler for all of them, past busy_timeout.
	err := d.bulkTx(ctx, func(tx *sql.Tx) error {
		now := clock(p.Now) // read once the write lock is held
		// Refused jobs stay the earliest expired, so each page reads past
		// those refused before it, until Limit jobs are reaped or no expired
		// lease is left: read again from the start, Limit refused jobs
		// filled every call, and no other expired lease was reaped again.
		skip := []byte("[]")
		for len(reaped) < limit {
			expired, err := queryJobs(ctx, tx, queries.Get("ReapCandidates"), sql.Named("now", micros(now)),
				sql.Named("skip", string(skip)), sql.Named("limit", limit-len(reaped)))
			if err != nil {
				return fmt.Errorf("reap: select expired leases: %w", err)
			}
			before := len(refused.IDs)
			for _, j := range expired {
				r, err := reapSaved(ctx, tx, j, now)
				if err != nil {
					return err
				}
				if r.refused != nil {
					refused.IDs, refused.Errs = append(refused.IDs, j.ID), append(refused.Errs, r.refused)
				}
				if r.job != nil {
					reaped = append(reaped, r.job)
				}
			}
			if len(refused.IDs) == before {
				break // a page reaped in full: Limit reached, or none left
			}
			if skip, err = json.Marshal(refused.IDs); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var queues []string
	seen := map[string]bool{}
	for _, j := range reaped {
		if j.Status == lifecycle.StatusQueued && !seen[j.Queue] {
			seen[j.Queue] = true
			queues = append(queues, j.Queue)
		}
	}
	d.wake.publish(queues)
	if len(refused.IDs) > 0 {
		return reaped, &refused
	}
	return reaped, nil
}

// savedReap is reapSaved's answer: the job as it ends up, or the database's
// refusal of its reap.
type savedReap struct {
	job     *driver.Job
	refused error
}

// reapSaved reaps j in a savepoint of its own, undone when the database
// refuses it: one refused job failed the whole transaction, and met every
// later call first (it expired first), so no other expired lease was ever
// reaped. An error of its own (ctx ended, the savepoint failed) ends the call.
func reapSaved(ctx context.Context, tx *sql.Tx, j *driver.Job, now time.Time) (savedReap, error) {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT drover_reap"); err != nil {
		return savedReap{}, fmt.Errorf("reap job %d: %w", j.ID, err)
	}
	r, err := reapOne(ctx, tx, j, now)
	after := context.WithoutCancel(ctx) // the savepoint ends whatever became of ctx
	if err != nil {
		if ctx.Err() != nil {
			return savedReap{}, err
		}
		if _, rerr := tx.ExecContext(after, "ROLLBACK TO drover_reap"); rerr != nil {
			return savedReap{}, fmt.Errorf("%w (and undoing it failed: %v)", err, rerr)
		}
	}
	if _, rerr := tx.ExecContext(after, "RELEASE drover_reap"); rerr != nil {
		return savedReap{}, fmt.Errorf("reap job %d: %w", j.ID, rerr)
	}
	return savedReap{job: r, refused: err}, nil
}

func reapOne(ctx context.Context, tx *sql.Tx, j *driver.Job, now time.Time) (*driver.Job, error) {
	wasRunning := j.Status == lifecycle.StatusRunning
	var entry any // NULL: a claimed job never started, so nothing ran to record
	if wasRunning {
		msg := stalledRunningError
		if j.Timeout > 0 && j.StartedAt != nil && j.LeaseExpiresAt != nil && j.LeaseExpiresAt.After(j.StartedAt.Add(j.Timeout)) {
			msg = stalledTimeoutError
		}
		e, err := errorEntry(j.Attempt, now, msg, "")
		if err != nil {
			return nil, err
		}
		entry = e
	}
	kept, err := readKeptClaim(ctx, tx, j.ID, j.Status)
	if err != nil {
		return nil, err
	}
	stalled, err := queryJob(ctx, tx, queries.Get("ReapStall"),
		sql.Named("id", j.ID),
		sql.Named("from_status", string(j.Status)),
		sql.Named("attempt", j.Attempt),
		sql.Named("lease_token", j.LeaseToken),
		sql.Named("now", micros(now)),
		sql.Named("error_entry", entry),
	)
	if err != nil {
		return nil, fmt.Errorf("reap job %d: stall: %w", j.ID, err)
	}
	if stalled == nil {
		return nil, nil // cannot happen under the write lock
	}
	if err := kept.writeOut(ctx, tx, j.ID); err != nil {
		return nil, err
	}
	if err := appendEvent(ctx, tx, lifecycle.OpStall, j.Status, stalled, now, actorEngine, ""); err != nil {
		return nil, err
	}
	query, args := "ReapRequeue", []any{sql.Named("id", j.ID), sql.Named("now", micros(now))}
	if wasRunning && stalled.Executions >= stalled.MaxAttempts {
		query, args = "ReapFail", append(args, sql.Named("error", stalledFailedError))
	}
	after, err := queryJob(ctx, tx, queries.Get(query), args...)
	if err != nil {
		return nil, fmt.Errorf("reap job %d: %w", j.ID, err)
	}
	if after == nil {
		return nil, fmt.Errorf("reap job %d: stalled row vanished", j.ID)
	}
	if err := moveCount(ctx, tx, after.Queue, j.Status, after.Status); err != nil { // by way of stalled
		return nil, err
	}
	if err := appendEvent(ctx, tx, lifecycle.OpRequeue, lifecycle.StatusStalled, after, now, actorEngine, ""); err != nil {
		return nil, err
	}
	return after, nil
}
