package pgdriver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/drivertest"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/lifecycle"
)

// A job's enqueued event lives in its row (migration 008), and a claim that
// starts its jobs writes claimed and started as one event row, or, without a
// request_id, keeps them in the job row (migration 012): JobEvents unfolds
// each into the events they stand for; a lone claim's row stays one event.
// Both claim statements (by queue, and by id for a claim naming several
// queues) do so.
func TestClaimStartWritesOneEventRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	var params []driver.InsertParams
	for _, q := range []string{"a", "a", "b", "c"} {
		params = append(params, driver.InsertParams{Kind: "k", Queue: q, Args: []byte(`{}`), MaxAttempts: 3})
	}
	if _, err := d.JobInsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	byQueue, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"a"}, Limit: 2, Owner: "w", Start: true, RequestID: "r1"})
	if err != nil || len(byQueue) != 2 {
		t.Fatalf("claim of queue a = %d jobs, %v; want 2", len(byQueue), err)
	}
	byID, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"b", "c"}, Limit: 1, Owner: "w", Start: true})
	if err != nil || len(byID) != 1 {
		t.Fatalf("claim of queues b, c = %d jobs, %v; want 1", len(byID), err)
	}
	lone, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"b", "c"}, Limit: 1, Owner: "w"})
	if err != nil || len(lone) != 1 {
		t.Fatalf("claim without start = %d jobs, %v; want 1", len(lone), err)
	}

	for _, j := range append(byQueue, byID...) {
		want := 0 // a worker's claim keeps its events in the job row (migration 012)
		if j.ID != byID[0].ID {
			want = 1 // one with a request_id writes its row, which a replay is answered from
		}
		if n := eventRows(t, d, j.ID); n != want {
			t.Errorf("job %d: %d event rows after enqueue and a starting claim, want %d", j.ID, n, want)
		}
		evs, err := d.JobEvents(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 3 {
			t.Fatalf("job %d: events %+v, want enqueued, claimed, started", j.ID, evs)
		}
		e, c, s := evs[0], evs[1], evs[2]
		if e.Type != lifecycle.EventEnqueued || e.Seq != 1 || e.From != "" || e.To != lifecycle.StatusQueued ||
			e.Actor != "client" || e.Attempt != 0 || e.RequestID != "" || !e.At.Equal(j.CreatedAt) || e.JobID != j.ID {
			t.Errorf("job %d: enqueue event %+v, want seq 1, → queued by client at %v", j.ID, e, j.CreatedAt)
		}
		if c.Type != lifecycle.EventClaimed || c.From != lifecycle.StatusQueued || c.To != lifecycle.StatusClaimed || c.Seq != j.Rev-1 {
			t.Errorf("job %d: claim event %+v, want queued → claimed at seq %d", j.ID, c, j.Rev-1)
		}
		if s.Type != lifecycle.EventStarted || s.From != lifecycle.StatusClaimed || s.To != lifecycle.StatusRunning ||
			s.Seq != j.Rev || s.RequestID != "" || !s.At.Equal(c.At) || s.Actor != c.Actor || s.Attempt != c.Attempt {
			t.Errorf("job %d: start event %+v, want claimed → running at seq %d, as the claim %+v", j.ID, s, j.Rev, c)
		}
	}
	for _, j := range byQueue {
		evs, _ := d.JobEvents(ctx, j.ID)
		if evs[1].RequestID != "r1" {
			t.Errorf("job %d: claim event's request_id %q, want r1", j.ID, evs[1].RequestID)
		}
	}
	evs, err := d.JobEvents(ctx, lone[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Type != lifecycle.EventClaimed || evs[1].To != lifecycle.StatusClaimed || evs[1].Seq != lone[0].Rev {
		t.Errorf("claim without start: events %+v, want enqueued then claimed at seq %d", evs, lone[0].Rev)
	}
}

// A completion without a request_id (every library worker's) keeps its
// succeeded event in the job row (migration 009) and writes no event row; one
// with a request_id writes its row, which a replay is answered from. JobEvents
// reads both alike; JobComplete, JobCompleteMany and JobCompleteManyErrs store
// them alike.
func TestCompletionWithoutRequestIDWritesNoEventRow(t *testing.T) {
	t.Parallel()
	d := open(t)
	drivertest.CompletionEvents(t, d, runningJobs(t, d, 6), eventStore(t, d), clockFromNow())
}

// clockFromNow gives the Now fields offsets from the time it was called.
func clockFromNow() func(time.Duration) *time.Time {
	t0 := time.Now()
	return func(off time.Duration) *time.Time { x := t0.Add(off); return &x }
}

// eventStore reads how d stores a job's events.
func eventStore(t *testing.T, d *pgdriver.Driver) drivertest.EventStore {
	return drivertest.EventStore{
		Rows: func(id int64) int { return eventRows(t, d, id) },
		ClaimInRow: func(id int64) bool {
			t.Helper()
			var seq *int64
			if err := d.Pool().QueryRow(context.Background(), "SELECT claim_seq FROM drover_jobs WHERE id = $1", id).Scan(&seq); err != nil {
				t.Fatal(err)
			}
			return seq != nil
		},
	}
}

// runningJobs enqueues n jobs and claims them started by owner "w".
func runningJobs(t *testing.T, d *pgdriver.Driver, n int) []*driver.Job {
	t.Helper()
	ctx := context.Background()
	params := make([]driver.InsertParams, n)
	for i := range params {
		params[i] = driver.InsertParams{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 3, Actor: "api:test"}
	}
	if _, err := d.JobInsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: n, Owner: "w", Start: true})
	if err != nil || len(jobs) != n {
		t.Fatalf("claim = %d jobs, %v; want %d", len(jobs), err, n)
	}
	return jobs
}

func fence(j *driver.Job, req string) driver.FenceParams {
	return driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, RequestID: req}
}

func eventRows(t *testing.T, d *pgdriver.Driver, id int64) int {
	t.Helper()
	var n int
	if err := d.Pool().QueryRow(context.Background(), "SELECT count(*) FROM drover_job_events WHERE job_id = $1", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Migrations 012, 009 and 008 down put the events kept in compact form (enqueued,
// succeeded and claim events in job rows, a starting claim's one row) back into one
// row each, and up again leaves each event in one place: the log reads the same
// before, at 007 (row by row) and after.
func TestMigrationsDownKeepCompactEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	jobs := runningJobs(t, d, 3)
	if _, err := d.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 3, Actor: "api:test"}}); err != nil {
		t.Fatal(err)
	}
	for i, req := range []string{"", "c1"} { // jobs[2] stays running
		if _, err := d.JobComplete(ctx, driver.CompleteParams{FenceParams: fence(jobs[i], req)}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []int64
	if err := d.Pool().QueryRow(ctx, "SELECT array_agg(id ORDER BY id) FROM drover_jobs").Scan(&ids); err != nil {
		t.Fatal(err)
	}
	before := map[int64][]lifecycle.Event{}
	for _, id := range ids {
		evs, err := d.JobEvents(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 || evs[0].Actor != "api:test" {
			t.Fatalf("job %d: events %+v, want an enqueued event by api:test first", id, evs)
		}
		before[id] = evs
	}
	if err := d.MigrateTo(7); err != nil {
		t.Fatal(err)
	}
	// One row per event again, as the drivers before 008 read them.
	for id, want := range before {
		rows, err := d.Pool().Query(ctx, `SELECT job_id, seq, type, coalesce(from_status, ''), to_status, at, actor,
			coalesce(request_id, ''), attempt FROM drover_job_events WHERE job_id = $1 ORDER BY seq`, id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lifecycle.Event, error) {
			var e lifecycle.Event
			err := r.Scan(&e.JobID, &e.Seq, &e.Type, &e.From, &e.To, &e.At, &e.Actor, &e.RequestID, &e.Attempt)
			return e, err
		})
		if err != nil {
			t.Fatal(err)
		}
		drivertest.SameEvents(t, fmt.Sprintf("job %d's rows at 007", id), got, want)
	}
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range before {
		got, err := d.JobEvents(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		drivertest.SameEvents(t, fmt.Sprintf("job %d's events after down to 007 and up", id), got, want)
	}
}

// A worker's claim keeps its events in the job row (migration 012). Every
// Drover statement that ends the claim writes them out as one row and clears
// claim_seq, in the statement that ends it; an update no Drover statement
// makes (an operator's own SQL) that would end it with them still in the row
// fails on migration 013's check instead of losing them.
func TestClaimEventsOutliveAnyUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	jobs := runningJobs(t, d, 4)
	before := map[int64][]lifecycle.Event{}
	for _, j := range jobs {
		evs, err := d.JobEvents(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 3 || eventRows(t, d, j.ID) != 0 {
			t.Fatalf("after a worker's claim: events %+v in %d rows; want enqueued, claimed, started, none in rows", evs, eventRows(t, d, j.ID))
		}
		before[j.ID] = evs
	}
	store := eventStore(t, d)

	// The operator's updates: one the claim outlives, one that would end it.
	if _, err := d.Pool().Exec(ctx, "UPDATE drover_jobs SET lease_expires_at = lease_expires_at + interval '1 minute' WHERE id = $1", jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	_, err := d.Pool().Exec(ctx, "UPDATE drover_jobs SET status = 'canceled', owner = NULL, lease_token = NULL, lease_expires_at = NULL, finished_at = now() WHERE id = $1", jobs[0].ID)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != "drover_jobs_claim_seq_live" {
		t.Fatalf("an operator's update that ends the claim: %v; want a check violation of drover_jobs_claim_seq_live", err)
	}
	if evs, _ := d.JobEvents(ctx, jobs[0].ID); eventRows(t, d, jobs[0].ID) != 0 || !store.ClaimInRow(jobs[0].ID) {
		t.Fatalf("after the refused update: events %+v, %d rows, claim_seq NULL; want the claim's events still in the row", evs, eventRows(t, d, jobs[0].ID))
	} else {
		drivertest.SameEvents(t, "after the refused update", evs, before[jobs[0].ID])
	}

	// Each of Drover's ends of a claim: its own event follows the claim's.
	at := clockFromNow()
	drivertest.ClaimEndings(t, d, jobs, before, store, at)

	// A second claim of the failed (requeued) job keeps its own events in the row again.
	again, err := d.JobClaim(ctx, driver.ClaimParams{ID: jobs[0].ID, Queues: []string{"q"}, Limit: 1, Owner: "w2", Start: true, Now: at(2 * time.Second)})
	if err != nil || len(again) != 1 {
		t.Fatalf("claim again = %v, %v", again, err)
	}
	evs, err := d.JobEvents(ctx, jobs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 6 || evs[4].Type != lifecycle.EventClaimed || evs[4].Actor != "worker:w2" || evs[4].Attempt != 2 ||
		evs[5].Type != lifecycle.EventStarted || evs[5].Seq != again[0].Rev {
		t.Errorf("after a second claim: events %+v; want the first claim's, the retry, then the second claim's, by worker:w2 at attempt 2", evs)
	}
}

// A claim in a transaction (ClaimParams.Abandoned set) is not canceled once it
// commits: a context that ends as the COMMIT is sent no longer turns a claim
// the database may have committed into an error, which left its jobs leased
// to a caller told nothing was claimed (helper-45). Here the context ends
// just before the COMMIT, from the Abandoned hook.
func TestClaimCommitIsNotCanceled(t *testing.T) {
	t.Parallel()
	d := open(t)
	if _, err := d.JobInsertMany(context.Background(), []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "w", LeaseDuration: time.Minute, Start: true,
		Abandoned: func() bool { cancel(); return false }})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim whose context ended before its COMMIT = %v, %v; want the job, committed", jobs, err)
	}
	if j, err := d.JobGet(context.Background(), jobs[0].ID); err != nil || j.Status != lifecycle.StatusRunning {
		t.Errorf("job after the claim: %+v, %v; want running", j, err)
	}
}

// A job an operator left stalled (no Drover statement leaves one so) is
// claimable, and its claimed event must say it came from stalled. A worker's
// claim keeps a queued job's events in its row and reads no job's old status
// for them: the one it writes out, for a stalled job, says stalled all the
// same; a claim with a request_id reads each job's old status.
func TestClaimOfAStalledJobSaysSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	for _, req := range []string{"", "r-stalled"} {
		jobs, err := d.JobInsertMany(ctx, []driver.InsertParams{
			{Kind: "k", Queue: "s", Args: []byte(`{}`), MaxAttempts: 3},
			{Kind: "k", Queue: "s", Args: []byte(`{}`), MaxAttempts: 3},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Pool().Exec(ctx, "UPDATE drover_jobs SET status = 'stalled' WHERE id = $1", jobs[1].Job.ID); err != nil {
			t.Fatal(err)
		}
		claimed, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"s"}, Limit: 2, Owner: "w", Start: true, RequestID: req})
		if err != nil || len(claimed) != 2 {
			t.Fatalf("request_id %q: claimed %d jobs, %v; want 2", req, len(claimed), err)
		}
		for i, want := range []lifecycle.Status{"queued", "stalled"} {
			evs, err := d.JobEvents(ctx, jobs[i].Job.ID)
			if err != nil {
				t.Fatal(err)
			}
			var from lifecycle.Status
			for _, e := range evs {
				if e.Type == "claimed" {
					from = e.From
				}
			}
			if from != want {
				t.Errorf("request_id %q, job %d: claimed event from %q, want from %q (events %v)", req, jobs[i].Job.ID, from, want, evs)
			}
		}
	}
}
