package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// JobCancel moves any non-terminal job to canceled, clearing its lease; a running
// handler learns of it at its next heartbeat. A terminal job gives
// ErrInvalidTransition, a missing one ErrNotFound.
func (d *Driver) JobCancel(ctx context.Context, p driver.CancelParams) (*driver.Job, error) {
	if err := driver.CheckRequestID(p.RequestID); err != nil {
		return nil, fmt.Errorf("cancel job %d: %w", p.ID, err) // as PostgreSQL's driver refuses it
	}
	actor := p.Actor
	if actor == "" {
		actor = actorOperator
	}
	var j *driver.Job
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		now := clock(p.Now) // once the write lock is held: the log's times keep its order
		before, err := mustGetJob(ctx, tx, "cancel", p.ID)
		if err != nil {
			return err
		}
		// An operator's call: a repeat at any attempt.
		known := func() (*driver.Job, error) { return before, nil }
		if seen, err := requestSeen(ctx, tx, p.ID, p.RequestID, []lifecycle.Op{lifecycle.OpCancel}, 0, known); err != nil {
			return err
		} else if seen != nil {
			before.Replayed = true
			j = before
			return nil
		}
		if before.Status.Terminal() {
			return driver.Refused("cancel", p.ID, before.Status, before.Attempt, driver.ErrInvalidTransition)
		}
		kept, err := readKeptClaim(ctx, tx, p.ID, before.Status)
		if err != nil {
			return err
		}
		after, err := queryJob(ctx, tx, queries.Get("JobCancel"),
			sql.Named("id", p.ID),
			sql.Named("from_status", string(before.Status)),
			sql.Named("now", micros(now)),
		)
		if err != nil {
			return fmt.Errorf("cancel job %d: %w", p.ID, err)
		}
		if after == nil {
			return fmt.Errorf("cancel job %d: %w", p.ID, driver.ErrInvalidTransition)
		}
		if err := moveCount(ctx, tx, after.Queue, before.Status, after.Status); err != nil {
			return err
		}
		if err := kept.writeOut(ctx, tx, p.ID); err != nil {
			return err
		}
		if err := appendEvent(ctx, tx, lifecycle.OpCancel, before.Status, after, now, actor, p.RequestID); err != nil {
			return err
		}
		j = after
		return nil
	})
	if err != nil {
		return nil, err
	}
	if j.Attempt > 0 && !j.Replayed {
		// A worker of this process that runs it stops it at once
		// (driver.CanceledWakeup); one of another process, at its next
		// heartbeat.
		d.wake.publish([]string{driver.CanceledWakeup(j.ID)})
	}
	return j, nil
}
