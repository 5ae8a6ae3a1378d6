package drivertest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

// A failure, a retry and a snooze each happen at one time, on the database
// clock (no Now injected): the error history's entry, finished_at, the run_at
// of a retry or snooze (that time plus the delay) and the transition's event
// all say the same instant, as PostgreSQL's now() gives one per statement.
// SQLite read the process clock for the error entry and run_at before its
// write transaction, and again inside it for finished_at and the event: a
// failed job's errors[].at came before its finished_at, and a retry's run_at
// was its delay after a time the job's history has nowhere.
func TestTransitionTimesAreOneReading(t *testing.T) {
	ctx := context.Background()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			d := testdb.Open(t, kind)
			running := func() *driver.Job {
				t.Helper()
				if _, err := d.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: json.RawMessage(`{}`), MaxAttempts: 5}}); err != nil {
					t.Fatal(err)
				}
				js, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "w", LeaseDuration: time.Minute, Start: true})
				if err != nil || len(js) != 1 {
					t.Fatalf("claim: %v %v", js, err)
				}
				return js[0]
			}
			fence := func(j *driver.Job) driver.FenceParams {
				return driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken}
			}
			eventAt := func(id int64, typ lifecycle.EventType) time.Time {
				t.Helper()
				evs, err := d.JobEvents(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				for i := len(evs) - 1; i >= 0; i-- {
					if evs[i].Type == typ {
						return evs[i].At
					}
				}
				t.Fatalf("job %d has no %s event: %+v", id, typ, evs)
				return time.Time{}
			}
			f := func(tm time.Time) string { return tm.UTC().Format(time.RFC3339Nano) }

			const delay = time.Hour
			j := running()
			r, err := d.JobFail(ctx, driver.FailParams{FenceParams: fence(j), Error: "boom", RetryDelay: delay})
			if err != nil || r.Status != lifecycle.StatusQueued || len(r.Errors) != 1 {
				t.Fatalf("retry: %+v %v", r, err)
			}
			at := eventAt(j.ID, lifecycle.EventRetried)
			if !r.Errors[0].At.Equal(at) || !r.RunAt.Equal(at.Add(delay)) {
				t.Errorf("retry of job %d with a delay of %s: errors[0].at %s, run_at %s, retried event at %s; want the error at the event's time and run_at %s after it",
					j.ID, delay, f(r.Errors[0].At), f(r.RunAt), f(at), delay)
			}

			j = running()
			r, err = d.JobFail(ctx, driver.FailParams{FenceParams: fence(j), Error: "boom", Permanent: true})
			if err != nil || r.Status != lifecycle.StatusFailed || len(r.Errors) != 1 || r.FinishedAt == nil {
				t.Fatalf("permanent failure: %+v %v", r, err)
			}
			at = eventAt(j.ID, lifecycle.EventFailed)
			if !r.Errors[0].At.Equal(*r.FinishedAt) || !r.FinishedAt.Equal(at) {
				t.Errorf("failure of job %d: errors[0].at %s, finished_at %s, failed event at %s; want one time",
					j.ID, f(r.Errors[0].At), f(*r.FinishedAt), f(at))
			}

			j = running()
			r, err = d.JobSnooze(ctx, driver.SnoozeParams{FenceParams: fence(j), Delay: delay})
			if err != nil || r.Status != lifecycle.StatusQueued {
				t.Fatalf("snooze: %+v %v", r, err)
			}
			if at = eventAt(j.ID, lifecycle.EventSnoozed); !r.RunAt.Equal(at.Add(delay)) {
				t.Errorf("snooze of job %d for %s: run_at %s, snoozed event at %s; want run_at %s after the event",
					j.ID, delay, f(r.RunAt), f(at), delay)
			}
		})
	}
}
