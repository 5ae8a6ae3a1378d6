package sqlitedriver

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
)

// A bulk delete (retention, a DLQ purge) is many write transactions, and
// another process's writer waits for the file lock in SQLite's busy handler,
// which looks again after 1, 2, 5 … and then every 100 ms. Run back to back,
// the transactions left it almost no moment to find the lock free: another
// connection's one-job enqueue waited for the whole of a 200k-job retention
// pass (632 ms; the pass took 561 ms), and a pass longer than busy_timeout
// (10 s: some four million jobs at that rate) fails it. Each transaction of a bulk delete is now followed
// by a pause as long as it took, so the other writer lands between them.
func TestBulkDeletesLetAnotherWriterIn(t *testing.T) {
	t.Parallel()
	t.Run("retention", func(t *testing.T) {
		t.Parallel()
		a, b := twoWriters(t)
		oldJobs(t, a, 3000, 1)
		landed := otherWriterDuring(t, b, func() {
			// As the engine's retention loop calls it (in batches of 1,000).
			for {
				n, err := a.JobDeleteFinished(context.Background(), driver.DeleteFinishedParams{OlderThan: time.Hour, Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				if n < 100 {
					return
				}
			}
		})
		if landed < 4 {
			t.Errorf("another connection's enqueues landed %d times during a 30-transaction retention pass, want at least 4", landed)
		}
	})
	t.Run("purge", func(t *testing.T) {
		t.Parallel()
		a, b := twoWriters(t)
		a.purgeBatch = 100
		oldJobs(t, a, 3000, 0)
		landed := otherWriterDuring(t, b, func() {
			if n, err := a.JobDLQPurge(context.Background(), driver.DLQPurgeParams{}); err != nil || n != 3000 {
				t.Fatalf("JobDLQPurge = %d, %v; want 3000", n, err)
			}
		})
		if landed < 4 {
			t.Errorf("another connection's enqueues landed %d times during a 30-transaction DLQ purge, want at least 4", landed)
		}
	})
	// The engine's reap pass calls until a call reaps nothing: after a crash
	// of a fleet, many transactions of up to 1,000 jobs each (~95 ms), and
	// the other process's heartbeats waited for all of them (past its lease,
	// or busy_timeout, on a large enough fleet).
	t.Run("reaper", func(t *testing.T) {
		t.Parallel()
		a, b := twoWriters(t)
		expiredLeases(t, a, 1000)
		landed := otherWriterDuring(t, b, func() {
			for {
				jobs, err := a.JobReapExpired(context.Background(), driver.ReapParams{Limit: 50})
				if err != nil {
					t.Fatal(err)
				}
				if len(jobs) == 0 {
					return
				}
			}
		})
		if landed < 4 {
			t.Errorf("another connection's enqueues landed %d times during a 20-transaction reap pass, want at least 4", landed)
		}
	})
}

// twoWriters opens one migrated file twice: two write connections, as two
// processes have.
func twoWriters(t *testing.T) (a, b *Driver) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "drover.db")
	open := func() *Driver {
		d, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	a = open()
	if err := a.MigrateUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a, open()
}

// oldJobs leaves n jobs finished two days ago: succeeded, or (succeed 0)
// failed by the reaper, their lease expired on their one execution.
func oldJobs(t *testing.T, d *Driver, n int, succeed int) {
	t.Helper()
	ctx := context.Background()
	past := time.Now().Add(-48 * time.Hour)
	for _, jobs := range runningSince(t, d, n, past) {
		if succeed == 0 {
			continue // failed by the reap below
		}
		cs := make([]driver.CompleteParams, len(jobs))
		for i, j := range jobs {
			cs[i] = driver.CompleteParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, Now: &past}}
		}
		for _, err := range d.JobCompleteManyErrs(ctx, cs) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if succeed == 0 {
		later := past.Add(time.Hour)
		for reaped := 0; reaped < n; {
			jobs, err := d.JobReapExpired(ctx, driver.ReapParams{Limit: 1000, Now: &later})
			if err != nil || len(jobs) == 0 {
				t.Fatalf("reap: %d jobs, %v after %d; want %d in all", len(jobs), err, reaped, n)
			}
			reaped += len(jobs)
		}
	}
}

// expiredLeases leaves n jobs running on one execution of one, whose leases
// expired two days ago.
func expiredLeases(t *testing.T, d *Driver, n int) {
	t.Helper()
	runningSince(t, d, n, time.Now().Add(-48*time.Hour))
}

// runningSince enqueues n jobs of one execution each and starts them at past
// on a lease of a minute, claims of up to 1,000; it answers the claims.
func runningSince(t *testing.T, d *Driver, n int, past time.Time) [][]*driver.Job {
	t.Helper()
	ctx := context.Background()
	runAt := past.Add(-time.Hour)
	var claims [][]*driver.Job
	for done := 0; done < n; done += 1000 {
		ps := make([]driver.InsertParams, min(1000, n-done))
		for i := range ps {
			ps[i] = params("old")
			ps[i].RunAt, ps[i].MaxAttempts = &runAt, 1
		}
		if _, err := d.JobInsertMany(ctx, ps); err != nil {
			t.Fatal(err)
		}
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"old"}, Limit: len(ps), Owner: "w", Start: true,
			LeaseDuration: time.Minute, Now: &past})
		if err != nil || len(jobs) != len(ps) {
			t.Fatalf("claim: %d jobs, %v; want %d", len(jobs), err, len(ps))
		}
		claims = append(claims, jobs)
	}
	return claims
}

// otherWriterDuring enqueues through b, one job a transaction 2 ms apart,
// while bulk runs, and answers how many of those enqueues committed while it ran.
func otherWriterDuring(t *testing.T, b *Driver, bulk func()) int64 {
	t.Helper()
	var landed atomic.Int64
	var stop atomic.Bool
	done := make(chan error, 1)
	go func() {
		for !stop.Load() {
			if _, err := b.JobInsertMany(context.Background(), []driver.InsertParams{params("new")}); err != nil {
				done <- err
				return
			}
			landed.Add(1)
			// Not back to back: an enqueuer that never lets go of the file
			// starves the bulk delete's BEGIN in turn (SQLite's lock is not
			// fair either way).
			time.Sleep(2 * time.Millisecond)
		}
		done <- nil
	}()
	before := landed.Load()
	bulk()
	during := landed.Load() - before
	stop.Store(true)
	if err := <-done; err != nil {
		t.Fatalf("the other writer's enqueue: %v", err)
	}
	return during
}
