package pgdriver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/lifecycle"
)

// failedJob enqueues a job and fails it for good; it returns its id.
func failedJob(t *testing.T, d *pgdriver.Driver) int64 {
	t.Helper()
	ctx := context.Background()
	res, err := d.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "dlq", Args: []byte(`{}`), MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].Job.ID
	jobs, err := d.JobClaim(ctx, driver.ClaimParams{ID: id, Limit: 1, Owner: "w", LeaseDuration: time.Minute, Start: true})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim job %d: %d jobs, %v", id, len(jobs), err)
	}
	j := jobs[0]
	j, err = d.JobFail(ctx, driver.FailParams{
		FenceParams: driver.FenceParams{ID: id, Attempt: j.Attempt, LeaseToken: j.LeaseToken}, Error: "boom", Permanent: true,
	})
	if err != nil || j.Status != lifecycle.StatusFailed {
		t.Fatalf("fail job %d: %v", id, err)
	}
	return id
}

// A DLQ purge and retention's delete of finished jobs, run at once over the
// same failed jobs, do not deadlock: both lock the job rows in id order before
// deleting them. (Before, the purge deleted in its scan's order and retention
// in its join's, and one of them failed with SQLSTATE 40P01.)
func TestDLQPurgeAndRetentionDoNotDeadlock(t *testing.T) {
	ctx := context.Background()
	const rounds, perRound = 5, 300
	for r := range rounds {
		// A fresh table of jobs that wait, analyzed before any job failed, so
		// that the purge reads the failed ones through its index, in (queue,
		// id) order.
		d := open(t)
		insertWaiting(t, d, 20000)
		if _, err := d.Pool().Exec(ctx, "ANALYZE drover_jobs"); err != nil {
			t.Fatal(err)
		}
		for range perRound {
			failedJob(t, d)
		}
		// Failed jobs of several queues, so that the purge's index order
		// (queue, id) is not id order.
		if _, err := d.Pool().Exec(ctx, "UPDATE drover_jobs SET queue = 'dlq-' || (id % 3) WHERE status = 'failed'"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var purgeErr error
		retentionErrs := make([]error, 2)
		start := make(chan struct{})
		wg.Add(3)
		go func() {
			defer wg.Done()
			<-start
			_, purgeErr = d.JobDLQPurge(ctx, driver.DLQPurgeParams{})
		}()
		for i := range retentionErrs {
			go func() {
				defer wg.Done()
				<-start
				for {
					n, err := d.JobDeleteFinished(ctx, driver.DeleteFinishedParams{Before: time.Now().Add(time.Hour), Limit: 50})
					if err != nil || n == 0 {
						retentionErrs[i] = err
						return
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		if purgeErr != nil {
			t.Fatalf("round %d: purge: %v", r, purgeErr)
		}
		for _, err := range retentionErrs {
			if err != nil {
				t.Fatalf("round %d: retention: %v", r, err)
			}
		}
		var left int
		if err := d.Pool().QueryRow(ctx, "SELECT count(*) FROM drover_jobs WHERE status = 'failed'").Scan(&left); err != nil || left != 0 {
			t.Fatalf("round %d: %d failed jobs left (%v), want 0", r, left, err)
		}
	}
}
