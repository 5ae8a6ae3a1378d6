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

// JobFail records the failed execution in the error history and, in the same
// guarded UPDATE, retries the job at RetryAt or now + RetryDelay (running → queued, event "retried")
// while !Permanent and executions < max_attempts, else fails it (running →
// failed with error = Error, event "failed").
func (d *Driver) JobFail(ctx context.Context, p driver.FailParams) (*driver.Job, error) {
	if err := driver.CheckTime("retry_at", p.RetryAt); err != nil {
		return nil, fmt.Errorf("fail job %d: %w", p.ID, err)
	}
	msg := driver.FailureText(p.Error) // stored as PostgreSQL stores it
	stack := driver.StackText(p.Stack)
	var now time.Time // the failure's time, read once the write lock is held
	j, err := d.fence(ctx, p.FenceParams, fenced{
		verb:  "fail",
		query: "JobFail",
		ops:   driver.FailOps(p.Permanent),
		args: []any{
			sql.Named("permanent", p.Permanent),
			sql.Named("error", msg),
		},
		at: func(at time.Time) ([]any, error) {
			now = at
			entry, err := errorEntry(p.Attempt, now, msg, stack)
			if err != nil {
				return nil, err
			}
			retryAt := p.RetryAt
			if retryAt.IsZero() {
				retryAt = now.Add(p.RetryDelay)
			}
			return []any{sql.Named("retry_at", micros(retryAt)), sql.Named("error_entry", entry)}, nil
		},
	})
	if err != nil {
		return nil, err
	}
	if !j.Replayed && j.Status == lifecycle.StatusQueued && !j.RunAt.After(now) {
		d.wake.publish([]string{j.Queue})
	}
	return j, nil
}

// JobSnooze moves running → queued at RunAt (now + Delay if zero) and gives the execution back
// (executions-1), so a snooze does not use up max_attempts.
func (d *Driver) JobSnooze(ctx context.Context, p driver.SnoozeParams) (*driver.Job, error) {
	if err := driver.CheckTime("run_at", p.RunAt); err != nil {
		return nil, fmt.Errorf("snooze job %d: %w", p.ID, err)
	}
	var now time.Time // the snooze's time, read once the write lock is held
	j, err := d.fence(ctx, p.FenceParams, fenced{
		verb:  "snooze",
		query: "JobSnooze",
		ops:   []lifecycle.Op{lifecycle.OpSnooze},
		at: func(at time.Time) ([]any, error) {
			now = at
			runAt := p.RunAt
			if runAt.IsZero() {
				runAt = now.Add(p.Delay)
			}
			return []any{sql.Named("run_at", micros(runAt))}, nil
		},
	})
	if err != nil {
		return nil, err
	}
	if !j.Replayed && !j.RunAt.After(now) {
		d.wake.publish([]string{j.Queue})
	}
	return j, nil
}

// errorEntry is one element of the errors JSON array. Its time is kept to the
// microsecond, as every other time on both drivers is (PostgreSQL's
// timestamptz): it carried nanoseconds here alone.
func errorEntry(attempt int, at time.Time, msg, stack string) (string, error) {
	b, err := json.Marshal(driver.AttemptError{Attempt: attempt, At: at.UTC().Truncate(time.Microsecond), Error: msg, Stack: stack})
	return string(b), err
}
