package pgdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
)

// JobDeleteFinished answers fewer than its limit only when no finished job
// older than the cutoff is left: the engine's retention pass ends at such an
// answer and the next begins a retention interval later. A DLQ purge deletes
// failed jobs but not their drover_finished rows, which retention tidies once
// they are old enough; a call whose batch of rows was all such rows deleted
// nothing, and answered 0, so that after a purge of N failed jobs retention
// moved on by 1,000 rows a minute (a million purged: seventeen hours in which
// the jobs that finished beside them were kept, and the table grew).
func TestRetentionIsNotHeldUpByPurgedJobsRows(t *testing.T) {
	ctx := context.Background()
	d := open(t)
	const purged = 1200
	params := make([]driver.InsertParams, purged)
	for i := range params {
		params[i] = driver.InsertParams{Kind: "k", Queue: "dlq", Args: []byte(`{}`), MaxAttempts: 1}
	}
	if _, err := d.JobInsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	for failed := 0; failed < purged; {
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"dlq"}, Limit: 100, Owner: "w", LeaseDuration: time.Minute, Start: true})
		if err != nil || len(jobs) == 0 {
			t.Fatalf("claim: %d jobs, %v", len(jobs), err)
		}
		for _, j := range jobs { // one drover_finished row each
			if _, err := d.JobFail(ctx, driver.FailParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken},
				Error: "boom", Permanent: true}); err != nil {
				t.Fatal(err)
			}
		}
		failed += len(jobs)
	}
	if n, err := d.JobDLQPurge(ctx, driver.DLQPurgeParams{Queue: "dlq"}); err != nil || n != purged {
		t.Fatalf("JobDLQPurge = %d, %v; want %d", n, err, purged)
	}
	// A job that succeeded after them.
	res, err := d.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := d.JobClaim(ctx, driver.ClaimParams{ID: res[0].Job.ID, Limit: 1, Owner: "w", LeaseDuration: time.Minute, Start: true})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v, %v", jobs, err)
	}
	j := jobs[0]
	if _, err := d.JobComplete(ctx, driver.CompleteParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken}}); err != nil {
		t.Fatal(err)
	}
	n, err := d.JobDeleteFinished(ctx, driver.DeleteFinishedParams{Before: time.Now().Add(time.Hour), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("JobDeleteFinished = %d, want 1 (the succeeded job): an answer short of the limit ends the retention pass", n)
	}
	if _, err := d.JobGet(ctx, j.ID); err == nil {
		t.Errorf("the succeeded job is still there")
	}
	var rows int
	if err := d.Pool().QueryRow(ctx, "SELECT count(*) FROM drover_finished").Scan(&rows); err != nil || rows != 0 {
		t.Errorf("drover_finished has %d rows (%v), want 0", rows, err)
	}
}
