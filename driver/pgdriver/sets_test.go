package pgdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

// Migration 006 moves the claimable, leased and finished sets out of the job
// row's indexes. A database with jobs in every state comes through it (and back
// down, and up again) with each job in its set: the queued ones are claimed, the
// expired lease is reaped, the finished ones are deleted by retention.
func TestMigration006CarriesEveryJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openUnmigrated(t, testdb.PostgresURL(t))
	if err := d.MigrateTo(5); err != nil {
		t.Fatal(err)
	}
	// As the driver of migration 005 left them.
	_, err := d.Pool().Exec(ctx, `
INSERT INTO drover_jobs (kind, queue, status, priority, run_at, max_attempts, attempt, executions,
                         owner, lease_token, lease_expires_at, result, error, finished_at) VALUES
  ('k', 'a', 'queued',    0, now() - interval '1 minute', 3, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL),
  ('k', 'a', 'queued',    1, now() - interval '2 minutes', 3, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL),
  ('k', 'b', 'queued',    0, now() - interval '1 minute', 3, 1, 0, NULL, NULL, NULL, NULL, NULL, NULL),
  ('k', 'a', 'queued',    0, now() + interval '1 day',    3, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL),
  ('k', 'a', 'running',   0, now() - interval '1 hour',   3, 1, 1, 'w', gen_random_uuid(), now() - interval '1 minute', NULL, NULL, NULL),
  ('k', 'a', 'claimed',   0, now() - interval '1 hour',   3, 1, 0, 'w', gen_random_uuid(), now() + interval '1 hour', NULL, NULL, NULL),
  ('k', 'a', 'succeeded', 0, now() - interval '1 hour',   3, 1, 1, NULL, NULL, NULL, '{}', NULL, now() - interval '30 minutes'),
  ('k', 'a', 'failed',    0, now() - interval '1 hour',   1, 1, 1, NULL, NULL, NULL, NULL, 'boom', now() - interval '30 minutes'),
  ('k', 'a', 'canceled',  0, now() - interval '1 hour',   3, 0, 0, NULL, NULL, NULL, NULL, NULL, now() - interval '20 minutes')`)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint{6, 5, 6} {
		if err := d.MigrateTo(v); err != nil {
			t.Fatalf("migrate to %d: %v", v, err)
		}
	}
	if err := d.CheckInvariants(ctx); err != nil {
		t.Fatalf("after migration 006: %v", err)
	}
	if err := d.MigrateUp(ctx); err != nil { // the driver's statements need the latest schema
		t.Fatal(err)
	}

	claimed, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"a", "b"}, Limit: 10, Owner: "w2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 3 || claimed[0].Queue != "a" || claimed[0].Priority != 0 || claimed[2].Priority != 1 {
		t.Errorf("claim after the migration = %d jobs %v, want the three ready ones in claim order", len(claimed), claimed)
	}
	reaped, err := d.JobReapExpired(ctx, driver.ReapParams{Limit: 10})
	if err != nil || len(reaped) != 1 || reaped[0].Status != lifecycle.StatusQueued {
		t.Errorf("reap after the migration = %v, %v; want the one expired running job, requeued", reaped, err)
	}
	n, err := d.JobDeleteFinished(ctx, driver.DeleteFinishedParams{Before: time.Now().Add(-10 * time.Minute), Limit: 10})
	if err != nil || n != 3 {
		t.Errorf("retention after the migration deleted %d, %v; want the 3 finished jobs", n, err)
	}
	if err := d.CheckInvariants(ctx); err != nil {
		t.Errorf("at the end: %v", err)
	}
}

// A cancel does not wait for a ready row that a claim holds (the claim locks
// the ready row, then the job; the cancel locks the job, and waiting for the
// ready row would close a cycle). If that claim then rolls back, the ready row
// outlives its job's claimability: the next claim deletes it and leaves the
// canceled job alone.
func TestCancelSkipsAHeldReadyRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	res, err := d.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].Job.ID
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM drover_ready WHERE id = $1 FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	j, err := d.JobCancel(cctx, driver.CancelParams{ID: id})
	if err != nil || j.Status != lifecycle.StatusCanceled {
		t.Fatalf("cancel while a claim holds the ready row = %v, %v; want canceled at once", j, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.CheckInvariants(ctx); err == nil {
		t.Fatal("CheckInvariants found nothing; want the stale ready row reported")
	}
	jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 10, Owner: "w"})
	if err != nil || len(jobs) != 0 {
		t.Fatalf("claim over the stale ready row = %v, %v; want nothing", jobs, err)
	}
	if err := d.CheckInvariants(ctx); err != nil {
		t.Errorf("after the claim: %v", err)
	}
	if got, err := d.JobGet(ctx, id); err != nil || got.Status != lifecycle.StatusCanceled {
		t.Errorf("job after the claim = %v, %v; want still canceled", got, err)
	}
}

// A claimable job without its ready row (as an older binary, which does not know
// drover_ready, would enqueue it) is never claimed until a repair step reaches
// it a minute or more after its enqueue (a younger one is left for the next
// walk); then it is, and the step says how many it repaired.
func TestRepairStepGivesAMissingJobItsReadyRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	insertWaiting(t, d, 5)
	var orphan int64
	if err := d.Pool().QueryRow(ctx, "DELETE FROM drover_ready WHERE id = (SELECT max(id) FROM drover_ready) RETURNING id").Scan(&orphan); err != nil {
		t.Fatal(err)
	}
	if err := d.CheckInvariants(ctx); err == nil {
		t.Fatal("CheckInvariants found nothing; want the job without a ready row reported")
	}
	claim := func() []*driver.Job {
		t.Helper()
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 10, Owner: "w"})
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	if got := claim(); len(got) != 4 {
		t.Fatalf("claim before the repair took %d jobs, want the 4 with ready rows", len(got))
	}
	if _, n, err := d.RepairStep(ctx, 0, 100); err != nil || n != 0 {
		t.Fatalf("a walk over a job enqueued just now repaired %d (%v), want 0: it waits until it is a minute old", n, err)
	}
	if _, err := d.Pool().Exec(ctx, "UPDATE drover_jobs SET created_at = created_at - interval '61 seconds' WHERE id = $1", orphan); err != nil {
		t.Fatal(err)
	}
	// In steps of 2 over 5 jobs: 2, 2, then 1 and the end of the table.
	var after int64
	var steps, total int
	for {
		next, n, err := d.RepairStep(ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		steps, total = steps+1, total+n
		if next == 0 {
			break
		}
		if next <= after || steps > 3 {
			t.Fatalf("repair step %d went from %d to %d", steps, after, next)
		}
		after = next
	}
	if steps != 3 || total != 1 {
		t.Errorf("repair walk: %d steps repairing %d jobs, want 3 steps repairing 1", steps, total)
	}
	if got := claim(); len(got) != 1 || got[0].ID != orphan {
		t.Errorf("claim after the repair took %v, want job %d", got, orphan)
	}
	if _, n, err := d.RepairStep(ctx, 0, 100); err != nil || n != 0 {
		t.Errorf("a second walk repaired %d (%v), want 0", n, err)
	}
	if err := d.CheckInvariants(ctx); err != nil {
		t.Errorf("at the end: %v", err)
	}
}

// A leased job that no drover_leases row names (as an older binary, which does
// not know that table, would claim it) is never reaped when its worker dies,
// until a repair step reaches it after its lease expired; then the step names
// it in a lease row and the next reaper pass requeues it. A lease that has not
// expired yet is left alone, and that job's completion still lands.
func TestRepairStepGivesAnExpiredUncoveredLeaseARow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	past := time.Now().Add(-10 * time.Minute)
	ps := make([]driver.InsertParams, 3)
	for i := range ps {
		ps[i] = driver.InsertParams{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 3, RunAt: &past}
	}
	if _, err := d.JobInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	expired, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 2, Owner: "w", Start: true,
		LeaseDuration: time.Minute, Now: &past})
	if err != nil || len(expired) != 2 {
		t.Fatalf("claim with a lease in the past = %d jobs, %v; want 2", len(expired), err)
	}
	live, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "w", Start: true,
		LeaseDuration: time.Hour})
	if err != nil || len(live) != 1 {
		t.Fatalf("claim with a live lease = %d jobs, %v; want 1", len(live), err)
	}
	orphan, covered := expired[0].ID, expired[1].ID
	// The older binary's claims: orphan and the live job have no lease row.
	if _, err := d.Pool().Exec(ctx, "UPDATE drover_leases SET job_ids = ARRAY[$1::bigint] WHERE $1 = ANY (job_ids)", covered); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool().Exec(ctx, "DELETE FROM drover_leases WHERE $1 = ANY (job_ids)", live[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := d.CheckInvariants(ctx); err == nil {
		t.Fatal("CheckInvariants found nothing; want the two leased jobs without a lease row reported")
	}
	reaped, err := d.JobReapExpired(ctx, driver.ReapParams{Limit: 10})
	if err != nil || len(reaped) != 1 || reaped[0].ID != covered {
		t.Fatalf("reap before the repair = %v, %v; want only job %d", reaped, err, covered)
	}

	next, n, err := d.RepairStep(ctx, 0, 100)
	if err != nil || next != 0 || n != 1 {
		t.Fatalf("repair step = next %d, %d repaired, %v; want the end of the table and 1 (the expired orphan)", next, n, err)
	}
	reaped, err = d.JobReapExpired(ctx, driver.ReapParams{Limit: 10})
	if err != nil || len(reaped) != 1 || reaped[0].ID != orphan || reaped[0].Status != lifecycle.StatusQueued {
		t.Fatalf("reap after the repair = %v, %v; want job %d requeued", reaped, err, orphan)
	}
	if _, n, err := d.RepairStep(ctx, 0, 100); err != nil || n != 0 {
		t.Errorf("a second walk repaired %d (%v), want 0: the live lease is not due", n, err)
	}
	done := d.JobCompleteMany(ctx, completions(live))
	if len(done) != 1 || done[0].Err != nil || done[0].Job.Status != lifecycle.StatusSucceeded {
		t.Fatalf("completing the job with the live uncovered lease = %+v; want it succeeded", done)
	}
	if err := d.CheckInvariants(ctx); err != nil {
		t.Errorf("at the end: %v", err)
	}
}

// Migration 007 stores the job-id arrays of the lease and finished rows
// uncompressed (a claim's 8 kB array spent most of its insert in pglz), and
// its down migration restores the default.
func TestMigration007StoresSetArraysUncompressed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	storage := func() string {
		t.Helper()
		var s string
		err := d.Pool().QueryRow(ctx, `SELECT string_agg(c.relname || '=' || a.attstorage::text, ',' ORDER BY c.relname)
			FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
			WHERE a.attname = 'job_ids' AND c.relname IN ('drover_leases', 'drover_finished')
			  AND c.relnamespace = to_regnamespace(current_schema())`).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := storage(); got != "drover_finished=e,drover_leases=e" {
		t.Errorf("after MigrateUp: storage %s, want external (e) for both", got)
	}
	if err := d.MigrateTo(6); err != nil {
		t.Fatal(err)
	}
	if got := storage(); got != "drover_finished=x,drover_leases=x" {
		t.Errorf("after migrating down to 6: storage %s, want extended (x) for both", got)
	}
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	insertWaiting(t, d, 1200)
	jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1200, Owner: "w", Start: true})
	if err != nil || len(jobs) != 1200 {
		t.Fatalf("claim = %d jobs, %v; want 1200", len(jobs), err)
	}
	var compressed *string
	if err := d.Pool().QueryRow(ctx, "SELECT pg_column_compression(job_ids) FROM drover_leases").Scan(&compressed); err != nil {
		t.Fatal(err)
	}
	if compressed != nil {
		t.Errorf("the claim's lease row is compressed with %s, want stored as is", *compressed)
	}
	for _, o := range d.JobCompleteMany(ctx, completions(jobs)) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
	}
	if err := d.CheckInvariants(ctx); err != nil {
		t.Error(err)
	}
}
