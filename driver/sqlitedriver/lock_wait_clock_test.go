package sqlitedriver

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
)

// holdWriteLock takes the file's write lock from another driver on it (as
// another process would) and returns the function that lets it go, which
// reports when it did.
func holdWriteLock(t *testing.T, path string) (release func() time.Time) {
	t.Helper()
	other := openMigratedAt(t, path)
	tx, err := other.DB().BeginTx(context.Background(), nil) // BEGIN IMMEDIATE
	if err != nil {
		t.Fatal(err)
	}
	return func() time.Time {
		at := time.Now()
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		return at
	}
}

// A claim or a heartbeat that waits for the write lock (another process
// writing, the one write connection's queue) counts its lease from when it
// holds the lock, as the reaper reads its clock then. The claim read the
// clock before the wait: one that waited longer than its lease committed a
// lease already expired, and the first reap after it (any process's engine)
// took the job back with an execution used and no run; on its last attempt
// the job went to the DLQ, "lease expired while running" (helper-85). The
// heartbeat's extension was cut short by the wait the same way.
func TestLeaseCountsFromTheWriteLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "drover.db")
	d := openMigratedAt(t, path)
	if _, err := d.JobInsertMany(ctx, []driver.InsertParams{params("lock"), params("lock")}); err != nil {
		t.Fatal(err)
	}
	const lease, wait = 200 * time.Millisecond, 600 * time.Millisecond

	// The claim, behind another writer for three of its leases.
	release := holdWriteLock(t, path)
	type claimed struct {
		jobs []*driver.Job
		err  error
	}
	done := make(chan claimed, 1)
	go func() {
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"lock"}, Limit: 1, Owner: "w1", LeaseDuration: lease, Start: true})
		done <- claimed{jobs, err}
	}()
	time.Sleep(wait) // the time the claim waits: what is measured
	freed := release()
	c := <-done
	if c.err != nil || len(c.jobs) != 1 {
		t.Fatalf("claim: %v, %v", c.jobs, c.err)
	}
	j := c.jobs[0]
	if min := freed.Add(lease).Truncate(time.Microsecond); j.LeaseExpiresAt == nil || j.LeaseExpiresAt.Before(min) {
		t.Errorf("a claim that waited %s for the write lock got a lease to %v, %s before the lock was free + its %s lease",
			wait, j.LeaseExpiresAt, min.Sub(*j.LeaseExpiresAt), lease)
	}
	reaped, err := d.JobReapExpired(ctx, driver.ReapParams{})
	if err != nil || len(reaped) != 0 {
		t.Errorf("a reap right after the claim's answer took back %d job(s) (%v); want none: its lease was just granted", len(reaped), err)
	}

	// The heartbeat, likewise.
	release = holdWriteLock(t, path)
	type beat struct {
		res driver.HeartbeatResult
		err error
	}
	hb := make(chan beat, 1)
	go func() {
		res, err := d.JobHeartbeat(ctx, driver.HeartbeatParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, LeaseDuration: lease}})
		hb <- beat{res, err}
	}()
	time.Sleep(wait)
	freed = release()
	b := <-hb
	if b.err != nil {
		t.Fatalf("heartbeat: %v", b.err)
	}
	if min := freed.Add(lease).Truncate(time.Microsecond); b.res.LeaseExpiresAt.Before(min) {
		t.Errorf("a heartbeat that waited %s for the write lock extended the lease to %v, %s before the lock was free + its %s lease",
			wait, b.res.LeaseExpiresAt, min.Sub(b.res.LeaseExpiresAt), lease)
	}
}
