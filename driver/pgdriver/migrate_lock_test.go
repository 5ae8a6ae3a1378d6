package pgdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
)

// A migration that needs a table's exclusive lock (016 adds a column to
// drover_jobs) while a long transaction reads the table (a pg_dump, a report,
// a caller's EnqueueTx) waits for it, and every statement on the table queues
// behind that wait: migrate up took the lock with no time limit, so the
// queue's heartbeats, claims, completions and enqueues stalled for as long as
// the reader's transaction lasted, and leases ran out meanwhile. It now waits
// a bounded time for the lock, lets the queue through, and tries again.
func TestMigrateUpDoesNotStallTheQueueBehindALongTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	jobs := runningJobs(t, d, 1)
	if err := d.MigrateTo(15); err != nil {
		t.Fatal(err)
	}

	reader, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reader.Rollback(ctx) }()
	if _, err := reader.Exec(ctx, "SELECT count(*) FROM drover_jobs"); err != nil {
		t.Fatal(err)
	}

	migrated := make(chan error, 1)
	go func() { migrated <- d.MigrateUp(ctx) }()
	// Until the migration waits for drover_jobs's lock behind the reader.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var waiting bool
		if err := d.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE relation = 'drover_jobs'::regclass AND mode = 'AccessExclusiveLock' AND NOT granted)`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-migrated:
			t.Fatalf("MigrateUp returned %v while a transaction reads drover_jobs, want it to wait", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the migration never waited for drover_jobs's lock")
		}
		time.Sleep(10 * time.Millisecond) // polling pg_locks, the wait's only sign
	}

	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := d.JobHeartbeat(hctx, driver.HeartbeatParams{FenceParams: fence(jobs[0], "")}); err != nil {
		t.Fatalf("a heartbeat while migrate up waits for the table's lock: %v after %s; want it answered", err, time.Since(start).Round(time.Millisecond))
	}
	// A write of the processes that run on while the migration waits, which
	// know the schema as it is (this driver's enqueue needs migration 017's
	// tables, not there yet).
	if _, err := d.Pool().Exec(hctx, "UPDATE drover_jobs SET rev = rev WHERE id = $1", jobs[0].ID); err != nil {
		t.Fatalf("a write while migrate up waits for the table's lock: %v after %s; want it answered", err, time.Since(start).Round(time.Millisecond))
	}

	if err := reader.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-migrated:
		if err != nil {
			t.Fatalf("MigrateUp once the reader committed: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("MigrateUp did not finish within 30 s of the reader's commit")
	}
	st, err := d.MigrateStatus(ctx)
	if err != nil || st.Dirty || st.Current != st.Latest() {
		t.Errorf("after migrate up: %+v, %v; want the latest version, clean", st, err)
	}
}
