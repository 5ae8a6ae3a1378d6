package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// fenced describes one lease-holder transition: a guarded UPDATE … RETURNING *
// whose WHERE clause names the status, attempt and lease_token the caller holds.
type fenced struct {
	verb  string         // for errors: "complete job 7: …"
	query string         // name of the statement in queries/lease.sql
	ops   []lifecycle.Op // the operations the statement may perform, to name the event
	args  []any          // statement arguments besides id, attempt, lease_token and now
	// at, when set, gives the arguments computed from the transition's time
	// (an error entry, a retry's or snooze's run_at): from the one reading of
	// the clock the row's other times and the event take, once the write lock
	// is held, as PostgreSQL's now() is one time for the whole statement.
	at func(now time.Time) ([]any, error)
	// rowEvent: the UPDATE keeps the event in the job row (a completion without
	// a request_id: finished_by), so none is appended.
	rowEvent bool
}

// applyFenced runs f inside tx. It reads the job first (the transaction holds the
// write lock, so the read is exact) to tell a missing job from a lost lease, to
// answer a repeated request_id, and to know the owner and status the event
// records after the UPDATE has cleared them.
func applyFenced(ctx context.Context, tx *sql.Tx, p driver.FenceParams, f fenced) (*driver.Job, error) {
	now := clock(p.Now)
	var status, owner string
	err := tx.QueryRowContext(ctx, queries.Get("JobStatusOwner"), sql.Named("id", p.ID)).Scan(&status, &owner)
	if err == sql.ErrNoRows {
		return nil, fmt.Errorf("%s job %d: %w", f.verb, p.ID, driver.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s job %d: %w", f.verb, p.ID, err)
	}
	load := func() (*driver.Job, error) { return mustGetJob(ctx, tx, f.verb, p.ID) }
	if before, err := requestSeen(ctx, tx, p.ID, p.RequestID, f.ops, p.Attempt, load); err != nil {
		return nil, err
	} else if before != nil {
		before.Replayed = true
		return before, nil
	}
	return applyFencedFrom(ctx, tx, p, f, lifecycle.Status(status), owner, now)
}

// applyFencedFrom runs f's guarded UPDATE on a row known to be in status from,
// held by owner, and appends its event.
func applyFencedFrom(ctx context.Context, tx *sql.Tx, p driver.FenceParams, f fenced, from lifecycle.Status, owner string, now time.Time) (*driver.Job, error) {
	args := append([]any{
		sql.Named("id", p.ID),
		sql.Named("attempt", p.Attempt),
		sql.Named("lease_token", driver.CanonicalToken(p.LeaseToken)),
		sql.Named("now", micros(now)),
	}, f.args...)
	if f.at != nil {
		more, err := f.at(now)
		if err != nil {
			return nil, fmt.Errorf("%s job %d: %w", f.verb, p.ID, err)
		}
		args = append(args, more...)
	}
	// Every transition from running but a completion without a request_id
	// ends the claim, and so takes its kept events out of the row.
	var kept *keptClaim
	if !f.rowEvent {
		var err error
		if kept, err = readKeptClaim(ctx, tx, p.ID, from); err != nil {
			return nil, err
		}
	}
	after, err := queryJob(ctx, tx, queries.Get(f.query), args...)
	if err != nil {
		return nil, fmt.Errorf("%s job %d: %w", f.verb, p.ID, err)
	}
	if after == nil {
		// The guard missed, so the row is as it was: say what it holds.
		cur, err := mustGetJob(ctx, tx, f.verb, p.ID)
		if err != nil {
			return nil, err
		}
		return nil, driver.Refused(f.verb, p.ID, cur.Status, cur.Attempt, driver.ErrLeaseLost)
	}
	if err := moveCount(ctx, tx, after.Queue, from, after.Status); err != nil {
		return nil, err
	}
	if err := kept.writeOut(ctx, tx, p.ID); err != nil {
		return nil, err
	}
	op := f.ops[0]
	for _, o := range f.ops {
		if _, ok := lifecycle.Lookup(o, from, after.Status); ok {
			op = o
			break
		}
	}
	if f.rowEvent {
		if err := lifecycle.Check(op, from, after.Status); err != nil {
			return nil, fmt.Errorf("job %d: %w", after.ID, err)
		}
		return after, nil
	}
	if err := appendEvent(ctx, tx, op, from, after, now, leaseActor(owner), p.RequestID); err != nil {
		return nil, err
	}
	return after, nil
}

// fence runs one lease-holder transition in its own write transaction.
func (d *Driver) fence(ctx context.Context, p driver.FenceParams, f fenced) (*driver.Job, error) {
	if err := driver.CheckRequestID(p.RequestID); err != nil {
		return nil, fmt.Errorf("%s job %d: %w", f.verb, p.ID, err) // as PostgreSQL's driver refuses it
	}
	var j *driver.Job
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		j, err = applyFenced(ctx, tx, p, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// JobStart moves claimed → running: executions+1, started_at = now, and the lease
// extended to now + LeaseDuration when that is positive.
func (d *Driver) JobStart(ctx context.Context, p driver.FenceParams) (*driver.Job, error) {
	return d.fence(ctx, p, fenced{
		verb:  "start",
		query: "JobStart",
		ops:   []lifecycle.Op{lifecycle.OpStart},
		args:  []any{sql.Named("lease_us", p.LeaseDuration.Microseconds())},
	})
}

// JobUnclaim moves claimed → queued, clearing the lease; run_at and executions
// are unchanged, and the job's queue gets a wake-up.
func (d *Driver) JobUnclaim(ctx context.Context, p driver.FenceParams) (*driver.Job, error) {
	j, err := d.fence(ctx, p, fenced{
		verb:  "unclaim",
		query: "JobUnclaim",
		ops:   []lifecycle.Op{lifecycle.OpUnclaim},
	})
	if err != nil {
		return nil, err
	}
	if !j.Replayed {
		d.wake.publish([]string{j.Queue})
	}
	return j, nil
}

// JobHeartbeat extends the lease of a claimed or running job to now +
// LeaseDuration, never moving its end earlier (see driver.Driver). It bumps rev and records no event unless it carries a
// RequestID, which is logged so that a repeat is recognised. If the job was
// canceled during this attempt it answers CancelRequested = true without error.
func (d *Driver) JobHeartbeat(ctx context.Context, p driver.HeartbeatParams) (driver.HeartbeatResult, error) {
	if err := driver.CheckRequestID(p.RequestID); err != nil {
		return driver.HeartbeatResult{}, fmt.Errorf("heartbeat job %d: %w", p.ID, err)
	}
	var res driver.HeartbeatResult
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		now := clock(p.Now) // once the write lock is held, as the claim's
		before, err := mustGetJob(ctx, tx, "heartbeat", p.ID)
		if err != nil {
			return err
		}
		// Canceled during this attempt, under this token (the one the cancel
		// cleared, kept in cancel_token: migration 012): the holder is told to
		// stop. Any other token is a stale fence, refused as at any other time.
		canceled := false
		if before.Status == lifecycle.StatusCanceled && before.Attempt == p.Attempt {
			var n int
			if err := tx.QueryRowContext(ctx, queries.Get("JobCanceledHolder"), sql.Named("id", p.ID),
				sql.Named("attempt", p.Attempt), sql.Named("lease_token", driver.CanonicalToken(p.LeaseToken))).Scan(&n); err != nil {
				return fmt.Errorf("heartbeat job %d: %w", p.ID, err)
			}
			canceled = n > 0
		}
		known := func() (*driver.Job, error) { return before, nil }
		if seen, err := requestSeen(ctx, tx, p.ID, p.RequestID, []lifecycle.Op{lifecycle.OpHeartbeat}, p.Attempt, known); err != nil {
			return err
		} else if seen != nil {
			if before.Status == lifecycle.StatusCanceled && before.Attempt == p.Attempt && !canceled {
				// A repeat of the holder's request_id with another token.
				return driver.Refused("heartbeat", p.ID, before.Status, before.Attempt, driver.ErrLeaseLost)
			}
			res, err = driver.HeartbeatReplay(before, p.FenceParams)
			return err
		}
		after, err := queryJob(ctx, tx, queries.Get("JobHeartbeat"),
			sql.Named("id", p.ID),
			sql.Named("attempt", p.Attempt),
			sql.Named("lease_token", driver.CanonicalToken(p.LeaseToken)),
			sql.Named("now", micros(now)),
			sql.Named("lease_us", heartbeatLease(p.LeaseDuration).Microseconds()),
		)
		switch {
		case err != nil:
			return fmt.Errorf("heartbeat job %d: %w", p.ID, err)
		case after == nil && canceled:
			res.CancelRequested = true
			return nil
		case after == nil:
			return driver.Refused("heartbeat", p.ID, before.Status, before.Attempt, driver.ErrLeaseLost)
		}
		if p.RequestID != "" {
			if err := appendEvent(ctx, tx, lifecycle.OpHeartbeat, before.Status, after, now, leaseActor(before.Owner), p.RequestID); err != nil {
				return err
			}
		}
		if after.LeaseExpiresAt != nil {
			res.LeaseExpiresAt = *after.LeaseExpiresAt
		}
		return nil
	})
	if err != nil {
		return driver.HeartbeatResult{}, err
	}
	return res, nil
}

// heartbeatLease is the extension a heartbeat asks for; 0 means the default 30s
// (as in pgdriver), since a heartbeat that extends nothing protects nothing.
func heartbeatLease(d time.Duration) time.Duration {
	if d <= 0 {
		return driver.DefaultLease
	}
	return d
}
