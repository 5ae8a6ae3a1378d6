package sqlitedriver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
)

// A DLQ purge deletes the jobs that were failed when it began, as PostgreSQL's
// one statement does: a job that fails while the purge's batches run is a new
// entry of the DLQ that the operator has not seen, and its error history is
// the record. The batches went on by id, so a job failing during the purge
// whose id was past the batch under way was deleted with the rest.
func TestDLQPurgeKeepsJobsFailedWhileItRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoWriters(t)
	a.purgeBatch = 50
	oldJobs(t, a, 1000, 0) // failed, ids 1-1000
	// Running in another process, with ids past every failed job's.
	res, err := b.JobInsertMany(ctx, []driver.InsertParams{params("late")})
	if err != nil {
		t.Fatal(err)
	}
	js, err := b.JobClaim(ctx, driver.ClaimParams{ID: res[0].Job.ID, Owner: "w", LeaseDuration: time.Minute, Start: true})
	if err != nil || len(js) != 1 {
		t.Fatalf("claim: %v, %v", js, err)
	}
	late := js[0]

	type answer struct {
		n   int
		err error
	}
	purged := make(chan answer, 1)
	go func() {
		n, err := a.JobDLQPurge(ctx, driver.DLQPurgeParams{})
		purged <- answer{n, err}
	}()
	// Once the purge's first batch has committed, the job fails.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := b.JobGet(ctx, 1); errors.Is(err, driver.ErrNotFound) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the purge's first batch did not commit within 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.JobFail(ctx, driver.FailParams{FenceParams: driver.FenceParams{ID: late.ID, Attempt: late.Attempt, LeaseToken: late.LeaseToken},
		Error: "boom", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	var ranOn bool
	select {
	case <-purged:
	default:
		ranOn = true // the fail landed between the purge's batches
	}
	if !ranOn {
		t.Skip("the purge ended before the job failed; nothing was tested")
	}
	got := <-purged
	if got.err != nil || got.n != 1000 {
		t.Errorf("JobDLQPurge = %d, %v; want the 1000 jobs failed when it began", got.n, got.err)
	}
	if _, err := a.JobGet(ctx, late.ID); err != nil {
		t.Errorf("job %d, failed while the purge ran: %v; want it kept in the DLQ", late.ID, err)
	}
}
