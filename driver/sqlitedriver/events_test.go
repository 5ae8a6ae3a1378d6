package sqlitedriver

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/drivertest"
	"github.com/drover-dev/drover/lifecycle"
)

// A job's enqueued event lives in its row (migration 004), and a claim that
// starts its jobs writes claimed and started as one event row: EventList
// unfolds both into the events they stand for; a lone claim's row stays one
// event.
func TestClaimStartWritesOneEventRow(t *testing.T) {
	f := newFixture(t)
	a := f.enqueue(nil)
	b := f.enqueue(func(p *driver.InsertParams) { p.Actor = "api:test" })
	started := f.claim(driver.ClaimParams{Limit: 1, Start: true, RequestID: "r1"})
	lone := f.claim(driver.ClaimParams{Limit: 1})
	if len(started) != 1 || started[0].ID != a.ID || len(lone) != 1 || lone[0].ID != b.ID {
		t.Fatalf("claims took %v and %v, want job %d then job %d", started, lone, a.ID, b.ID)
	}
	if n := f.eventRows(a.ID); n != 1 {
		t.Errorf("job %d: %d event rows after enqueue and a starting claim with a request_id, want 1", a.ID, n)
	}
	// Without a request_id (a worker's claim) the row keeps them (migration 009).
	w := f.enqueue(nil)
	if ws := f.claim(driver.ClaimParams{ID: w.ID, Limit: 1, Start: true}); len(ws) != 1 {
		t.Fatalf("claim of job %d took %v", w.ID, ws)
	} else if n, evs := f.eventRows(w.ID), f.events(w.ID); n != 0 || len(evs) != 3 || evs[1].Seq != ws[0].Rev-1 || evs[2].Seq != ws[0].Rev ||
		!evs[1].At.Equal(*ws[0].StartedAt) || evs[1].Actor != "worker:w1" {
		t.Errorf("job %d after a worker's claim: %d event rows, events %+v; want none, and claimed, started at seq %d, %d at %v by worker:w1",
			w.ID, n, evs, ws[0].Rev-1, ws[0].Rev, ws[0].StartedAt)
	}
	evs, err := f.d.JobEvents(f.ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	j := started[0]
	if len(evs) != 3 {
		t.Fatalf("job %d: events %+v, want enqueued, claimed, started", a.ID, evs)
	}
	e, c, s := evs[0], evs[1], evs[2]
	if e.Type != lifecycle.EventEnqueued || e.Seq != 1 || e.From != "" || e.To != lifecycle.StatusQueued ||
		e.Actor != "client" || e.Attempt != 0 || e.RequestID != "" || !e.At.Equal(a.CreatedAt) || e.JobID != a.ID {
		t.Errorf("enqueue event %+v, want seq 1, → queued by client at %v", e, a.CreatedAt)
	}
	if c.Type != lifecycle.EventClaimed || c.From != lifecycle.StatusQueued || c.To != lifecycle.StatusClaimed ||
		c.Seq != j.Rev-1 || c.RequestID != "r1" {
		t.Errorf("claim event %+v, want queued → claimed at seq %d with request_id r1", c, j.Rev-1)
	}
	if s.Type != lifecycle.EventStarted || s.From != lifecycle.StatusClaimed || s.To != lifecycle.StatusRunning ||
		s.Seq != j.Rev || s.RequestID != "" || !s.At.Equal(c.At) || s.Actor != c.Actor || s.Attempt != c.Attempt {
		t.Errorf("start event %+v, want claimed → running at seq %d, as the claim %+v", s, j.Rev, c)
	}
	evs, err = f.d.JobEvents(f.ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Actor != "api:test" || evs[1].Type != lifecycle.EventClaimed ||
		evs[1].To != lifecycle.StatusClaimed || evs[1].Seq != lone[0].Rev {
		t.Errorf("claim without start: events %+v, want enqueued by api:test, then claimed at seq %d", evs, lone[0].Rev)
	}
}

// A completion without a request_id keeps its succeeded event in the job row
// (migration 005) and writes no event row; one with a request_id writes its
// row. EventList reads both alike; JobComplete, JobCompleteMany and
// JobCompleteManyErrs store them alike.
func TestCompletionWithoutRequestIDWritesNoEventRow(t *testing.T) {
	f := newFixture(t)
	drivertest.CompletionEvents(t, f.d, f.runningJobs(6), f.eventStore(), f.at)
}

// runningJobs enqueues n jobs and claims them started, as a worker does (no
// request_id).
func (f *fixture) runningJobs(n int) []*driver.Job {
	f.t.Helper()
	for range n {
		f.enqueue(nil)
	}
	jobs := f.claim(driver.ClaimParams{Limit: n, Start: true})
	if len(jobs) != n {
		f.t.Fatalf("claim took %d jobs, want %d", len(jobs), n)
	}
	return jobs
}

// eventStore reads how the fixture's driver stores a job's events.
func (f *fixture) eventStore() drivertest.EventStore {
	return drivertest.EventStore{Rows: f.eventRows, ClaimInRow: func(id int64) bool { return f.claimSeq(id) != nil }}
}

func (f *fixture) claimSeq(id int64) *int64 {
	f.t.Helper()
	var seq *int64
	if err := f.d.read.QueryRowContext(f.ctx, "SELECT claim_seq FROM drover_jobs WHERE id = ?", id).Scan(&seq); err != nil {
		f.t.Fatal(err)
	}
	return seq
}

func (f *fixture) eventRows(id int64) int {
	f.t.Helper()
	var n int
	if err := f.d.read.QueryRowContext(f.ctx, "SELECT count(*) FROM drover_job_events WHERE job_id = ?", id).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) events(id int64) []lifecycle.Event {
	f.t.Helper()
	evs, err := f.d.JobEvents(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return evs
}

// A worker's claim keeps its events in the job row (migration 009) while the
// claim is live. Each of Drover's statements that ends it (a failure, a
// snooze, a cancel, a reap) writes them out as a row and clears claim_seq;
// an update no Drover statement makes (an operator's own SQL) that would end
// the claim with them still in the row fails on drover_jobs_claim_seq_live
// (migration 010) instead of losing them. The log keeps them once.
func TestClaimEventsOutliveAnyUpdate(t *testing.T) {
	f := newFixture(t)
	jobs := f.runningJobs(4)
	before := map[int64][]lifecycle.Event{}
	for _, j := range jobs {
		evs := f.events(j.ID)
		if len(evs) != 3 || f.eventRows(j.ID) != 0 {
			t.Fatalf("after a worker's claim: events %+v in %d rows; want enqueued, claimed, started, none in rows", evs, f.eventRows(j.ID))
		}
		before[j.ID] = evs
	}

	// The operator's updates: one the claim outlives, one that would end it.
	if _, err := f.d.write.ExecContext(f.ctx, "UPDATE drover_jobs SET lease_expires_at = lease_expires_at + 60000000 WHERE id = ?", jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	_, err := f.d.write.ExecContext(f.ctx, "UPDATE drover_jobs SET status = 'canceled', owner = NULL, lease_token = NULL, lease_expires_at = NULL, finished_at = 1 WHERE id = ?", jobs[0].ID)
	if err == nil || !strings.Contains(err.Error(), "CHECK constraint failed: drover_jobs_claim_seq_live") {
		t.Fatalf("an operator's update that ends the claim: %v; want a failed check drover_jobs_claim_seq_live", err)
	}
	if f.eventRows(jobs[0].ID) != 0 || f.claimSeq(jobs[0].ID) == nil {
		t.Fatalf("after the refused update: %d event rows, claim_seq NULL; want the claim's events still in the row", f.eventRows(jobs[0].ID))
	}
	drivertest.SameEvents(t, "after the refused update", f.events(jobs[0].ID), before[jobs[0].ID])

	// Each of Drover's ends of a claim: its own event follows the claim's.
	drivertest.ClaimEndings(t, f.d, jobs, before, f.eventStore(), f.at)
	for _, j := range jobs {
		f.history(j.ID)
	}

	// A second claim of the failed (requeued) job keeps its own events in the row again.
	again := f.claim(driver.ClaimParams{ID: jobs[0].ID, Limit: 1, Owner: "w2", Start: true, Now: f.at(2 * time.Second)})
	if len(again) != 1 {
		t.Fatalf("claim again = %v", again)
	}
	evs := f.events(jobs[0].ID)
	if len(evs) != 6 || evs[4].Type != lifecycle.EventClaimed || evs[4].Actor != "worker:w2" || evs[4].Attempt != 2 ||
		evs[5].Type != lifecycle.EventStarted || evs[5].Seq != again[0].Rev {
		t.Errorf("after a second claim: events %+v; want the first claim's, the retry, then the second claim's, by worker:w2 at attempt 2", evs)
	}
}

// Migrations 009, 005 and 004 down put the events kept in compact form (enqueued,
// succeeded and claim events in job rows, a starting claim's one row) back into one
// row each, and up again leaves each in one place: the log reads the same
// before, at 003 (row by row) and after.
func TestMigrationsDownKeepCompactEvents(t *testing.T) {
	f := newFixture(t)
	var ids []int64
	for range 4 {
		ids = append(ids, f.enqueue(func(p *driver.InsertParams) { p.Actor = "api:test" }).ID)
	}
	jobs := f.claim(driver.ClaimParams{Limit: 3, Start: true})
	if len(jobs) != 3 {
		t.Fatalf("claim took %v, want 3 jobs", jobs)
	}
	for i, req := range []string{"", "c1"} { // jobs[2] stays running, the fourth queued
		p := driver.CompleteParams{FenceParams: fp(jobs[i], f.at(time.Second))}
		p.RequestID = req
		if _, err := f.d.JobComplete(f.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	before := map[int64][]lifecycle.Event{}
	for _, id := range ids {
		before[id] = f.events(id)
		if len(before[id]) == 0 || before[id][0].Actor != "api:test" {
			t.Fatalf("job %d: events %+v, want an enqueued event by api:test first", id, before[id])
		}
	}
	m, src, err := f.d.migrator()
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := m.Migrate(3); err != nil {
		t.Fatalf("migrate down to 3: %v", err)
	}
	// One row per event again, as the drivers before 004 read them.
	for id, want := range before {
		rows, err := f.d.read.QueryContext(f.ctx, `SELECT job_id, seq, type, COALESCE(from_status, ''), to_status, at, actor,
			COALESCE(request_id, ''), attempt FROM drover_job_events WHERE job_id = ? ORDER BY seq`, id)
		if err != nil {
			t.Fatal(err)
		}
		var between []lifecycle.Event
		for rows.Next() {
			var e lifecycle.Event
			var at int64
			if err := rows.Scan(&e.JobID, &e.Seq, &e.Type, &e.From, &e.To, &at, &e.Actor, &e.RequestID, &e.Attempt); err != nil {
				t.Fatal(err)
			}
			e.At = fromMicros(at)
			between = append(between, e)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		drivertest.SameEvents(t, fmt.Sprintf("job %d's rows at 003", id), between, want)
	}
	if err := m.Up(); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	for id, want := range before {
		drivertest.SameEvents(t, fmt.Sprintf("job %d's events after down to 003 and up", id), f.events(id), want)
	}
}

// Migration 010 adds drover_jobs_claim_seq_live to the table's definition in
// place, which SQLite does not check against the rows already there: the
// migration does, and refuses to run (its version unapplied, the trigger kept)
// while a row breaks it. Once the row is fixed, it adds the check once and
// drops the trigger, and 010 down takes both back.
func TestMigration010ChecksRowsFirst(t *testing.T) {
	f := newFixture(t)
	migrateTo(t, f.d, 9)
	// A queued row holding a claim's events: no Drover statement writes it.
	// Written whole here: the driver's statements are the latest schema's
	// (they keep migration 013's counts).
	res, err := f.d.write.ExecContext(f.ctx, `INSERT INTO drover_jobs (kind, queue, status, run_at, max_attempts, created_at, claim_seq)
		VALUES ('k', 'default', 'queued', 0, 3, 0, 2)`)
	if err != nil {
		t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	j := struct{ ID int64 }{id}
	schema := func(when string, wantCheck, wantTrigger int) {
		t.Helper()
		var checks, triggers int
		if err := f.d.write.QueryRowContext(f.ctx, `SELECT
			(SELECT (length(sql) - length(replace(sql, 'CONSTRAINT drover_jobs_claim_seq_live CHECK', ''))) / length('CONSTRAINT drover_jobs_claim_seq_live CHECK')
			 FROM sqlite_schema WHERE type = 'table' AND name = 'drover_jobs'),
			(SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name = 'drover_jobs_claim_event_out')`).Scan(&checks, &triggers); err != nil {
			t.Fatal(err)
		}
		if checks != wantCheck || triggers != wantTrigger {
			t.Errorf("%s: the table's definition holds the check %d times, the trigger %d; want %d and %d", when, checks, triggers, wantCheck, wantTrigger)
		}
	}
	err = f.d.MigrateUp(f.ctx)
	if err == nil || !strings.Contains(err.Error(), "drover_jobs_claim_seq_live_holds") {
		t.Fatalf("MigrateUp over a row that breaks the check: %v; want drover_jobs_claim_seq_live_holds to fail", err)
	}
	if st, err := f.d.MigrateStatus(f.ctx); err != nil || st.Current != 9 || st.Dirty {
		t.Fatalf("after the refused migration: status %+v, %v; want version 9, clean", st, err)
	}
	schema("after the refused migration", 0, 1)

	if _, err := f.d.write.ExecContext(f.ctx, "UPDATE drover_jobs SET claim_seq = NULL WHERE id = ?", j.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.d.MigrateUp(f.ctx); err != nil {
		t.Fatalf("MigrateUp once the row is fixed: %v", err)
	}
	schema("after 010 up", 1, 0)
	if _, err := f.d.write.ExecContext(f.ctx, "UPDATE drover_jobs SET claim_seq = 2 WHERE id = ?", j.ID); err == nil ||
		!strings.Contains(err.Error(), "CHECK constraint failed: drover_jobs_claim_seq_live") {
		t.Errorf("the same update after 010: %v; want the check to refuse it", err)
	}
	migrateTo(t, f.d, 9)
	schema("after 010 down", 0, 1)
	if err := f.d.MigrateUp(f.ctx); err != nil {
		t.Fatal(err)
	}
	schema("after 010 up again", 1, 0)
}
