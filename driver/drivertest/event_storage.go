package drivertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// EventStore says how a driver stores one job's events, which no Driver method
// does: the drivers' own tests pass it to ClaimEndings and CompletionEvents.
type EventStore struct {
	// Rows is how many rows of drover_job_events the job has.
	Rows func(id int64) int
	// ClaimInRow reports whether the job row holds its last claim's events (its
	// claim_seq is set).
	ClaimInRow func(id int64) bool
}

// ClaimEndings ends the claims of four running jobs, each claimed and started by
// a worker's claim without a request_id (so their claimed and started events are
// kept in the job row), one by each of Drover's statements that end a claim
// another way than a completion: a failure, a snooze, a cancel and a reap. Each
// job's log must read as before[id] (its events after the claim) followed by the
// end's own event, and the end must have written the claim's events out as one
// row beside its own and cleared them from the job row, in its statement. at
// gives each statement's Now, as an offset from the claim; the reap's is an
// hour on, past the jobs' lease.
func ClaimEndings(t *testing.T, d driver.Driver, jobs []*driver.Job, before map[int64][]lifecycle.Event, store EventStore, at func(time.Duration) *time.Time) {
	t.Helper()
	ctx := context.Background()
	fence := func(j *driver.Job) driver.FenceParams {
		return driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, Now: at(time.Second)}
	}
	ends := []struct {
		name string
		end  func(j *driver.Job) error
		want lifecycle.EventType
	}{
		{"fail", func(j *driver.Job) error {
			_, err := d.JobFail(ctx, driver.FailParams{FenceParams: fence(j), Error: "boom"})
			return err
		}, lifecycle.EventRetried},
		{"snooze", func(j *driver.Job) error {
			_, err := d.JobSnooze(ctx, driver.SnoozeParams{FenceParams: fence(j), Delay: time.Minute})
			return err
		}, lifecycle.EventSnoozed},
		{"cancel", func(j *driver.Job) error {
			_, err := d.JobCancel(ctx, driver.CancelParams{ID: j.ID, Actor: "api:test", Now: at(time.Second)})
			return err
		}, lifecycle.EventCanceled},
		{"reap", func(j *driver.Job) error {
			got, err := d.JobReapExpired(ctx, driver.ReapParams{Limit: 10, Now: at(time.Hour)})
			if err == nil && (len(got) != 1 || got[0].ID != j.ID) {
				err = fmt.Errorf("reaped %d jobs, want job %d alone", len(got), j.ID)
			}
			return err
		}, lifecycle.EventRequeued},
	}
	if len(jobs) != len(ends) {
		t.Fatalf("ClaimEndings takes %d running jobs, got %d", len(ends), len(jobs))
	}
	for i, c := range ends {
		j := jobs[i]
		if err := c.end(j); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		evs, err := d.JobEvents(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) < 4 || evs[len(evs)-1].Type != c.want {
			t.Fatalf("%s: events %+v; want the claim's, then %s", c.name, evs, c.want)
		}
		SameEvents(t, c.name+": the events up to the claim's", evs[:3], before[j.ID])
		if rows, inRow := store.Rows(j.ID), store.ClaimInRow(j.ID); rows != len(evs)-2 || inRow {
			t.Errorf("%s: %d event rows for %d events, claim's events still in the job row: %v; want the claim's row and the end's, none in the job row",
				c.name, rows, len(evs), inRow)
		}
	}
}

// SameEvents compares two logs event by event, At as an instant.
func SameEvents(t *testing.T, what string, got, want []lifecycle.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %+v, want %+v", what, got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		same := g.At.Equal(w.At)
		g.At, w.At = time.Time{}, time.Time{}
		if !same || g != w {
			t.Errorf("%s: event %d is %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

// CompletionEvents completes six running jobs, each claimed and started by a
// worker's claim without a request_id, in pairs, one without a request_id and
// one with: one at a time (JobComplete), in one batch (JobCompleteMany) and in
// one batch answering only errors (JobCompleteManyErrs). A completion without
// a request_id (every library worker's) keeps its succeeded event in the job
// row beside the claim's and writes no event row; one with a request_id writes
// its row, which a replay is answered from, and the claim's, which its end
// wrote out. JobEvents reads both alike: enqueued, then claimed and started at
// the claim's time by the worker, at its attempt, then succeeded at the row's
// rev and finished_at, by the worker that claimed the job. at gives each
// completion's Now.
func CompletionEvents(t *testing.T, d driver.Driver, jobs []*driver.Job, store EventStore, at func(time.Duration) *time.Time) {
	t.Helper()
	ctx := context.Background()
	if len(jobs) != 6 {
		t.Fatalf("CompletionEvents takes 6 running jobs, got %d", len(jobs))
	}
	complete := func(j *driver.Job, req string) driver.CompleteParams {
		return driver.CompleteParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, RequestID: req, Now: at(time.Second)}}
	}
	done := map[int64]string{} // job → the request_id it completed with
	for _, p := range []driver.CompleteParams{complete(jobs[0], ""), complete(jobs[1], "c1")} {
		if _, err := d.JobComplete(ctx, p); err != nil {
			t.Fatal(err)
		}
		done[p.ID] = p.RequestID
	}
	many := []driver.CompleteParams{complete(jobs[2], ""), complete(jobs[3], "c2")}
	for i, o := range d.JobCompleteMany(ctx, many) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		done[many[i].ID] = many[i].RequestID
	}
	errs := []driver.CompleteParams{complete(jobs[4], ""), complete(jobs[5], "c3")}
	for i, err := range d.JobCompleteManyErrs(ctx, errs) {
		if err != nil {
			t.Fatal(err)
		}
		done[errs[i].ID] = errs[i].RequestID
	}
	for _, j := range jobs {
		req := done[j.ID]
		rows, inRow := 0, true // the claim's events and the succeeded event are in the job row
		if req != "" {
			rows, inRow = 2, false // the succeeded row, and the claim's, written out as it ended
		}
		if n, in := store.Rows(j.ID), store.ClaimInRow(j.ID); n != rows || in != inRow {
			t.Errorf("job %d (request_id %q): %d event rows, claim's events in the job row: %v; want %d, %v", j.ID, req, n, in, rows, inRow)
		}
		now, err := d.JobGet(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := d.JobEvents(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 4 {
			t.Fatalf("job %d: events %+v, want enqueued, claimed, started, succeeded", j.ID, evs)
		}
		s, by := evs[3], "worker:"+j.Owner
		for _, c := range evs[1:3] {
			if j.StartedAt == nil || !c.At.Equal(*j.StartedAt) || c.Actor != by || c.Attempt != j.Attempt || c.RequestID != "" || c.JobID != j.ID {
				t.Errorf("job %d (request_id %q): %s event %+v, want at the claim's start %v by %s, attempt %d",
					j.ID, req, c.Type, c, j.StartedAt, by, j.Attempt)
			}
		}
		if s.Type != lifecycle.EventSucceeded || s.From != lifecycle.StatusRunning || s.To != lifecycle.StatusSucceeded ||
			s.Seq != now.Rev || s.Seq != evs[2].Seq+1 || now.FinishedAt == nil || !s.At.Equal(*now.FinishedAt) ||
			s.Actor != by || s.Attempt != j.Attempt || s.RequestID != req || s.JobID != j.ID {
			t.Errorf("job %d: succeeded event %+v, want running → succeeded at seq %d by %s, attempt %d, request_id %q, at %v",
				j.ID, s, now.Rev, by, j.Attempt, req, now.FinishedAt)
		}
	}
}
