package pgdriver_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

// Concurrent requeues of one failed job create one job even when the database's
// default isolation is REPEATABLE READ: the requeue's look-up must see a job
// another requeue committed while it waited for the failed row's lock, which
// only READ COMMITTED gives, so the driver asks for it.
func TestDLQRequeueOnceUnderRepeatableReadDefault(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(testdb.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("default_transaction_isolation", "repeatable read")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads no + as a space
	d, err := pgdriver.New(ctx, u.String(), pgdriver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	var iso string
	if err := d.Pool().QueryRow(ctx, "SHOW default_transaction_isolation").Scan(&iso); err != nil || iso != "repeatable read" {
		t.Fatalf("default_transaction_isolation = %q, %v; want repeatable read", iso, err)
	}

	const rounds, n = 8, 16
	for r := range rounds {
		f := failedJob(t, d)
		jobs := make([]*driver.Job, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				jobs[i], errs[i] = d.JobDLQRequeue(ctx, driver.DLQRequeueParams{ID: f, Actor: "operator"})
			}()
		}
		close(start)
		wg.Wait()
		fresh := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d, requeue %d: %v", r, i, errs[i])
			}
			if !jobs[i].Replayed {
				fresh++
			}
		}
		var count int
		if err := d.Pool().QueryRow(ctx, "SELECT count(*) FROM drover_jobs WHERE retry_of = $1", f).Scan(&count); err != nil {
			t.Fatal(err)
		}
		if fresh != 1 || count != 1 {
			t.Fatalf("round %d: %d of %d concurrent requeues created a job, and %d jobs retry job %d; want 1 and 1", r, fresh, n, count, f)
		}
	}
}

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
