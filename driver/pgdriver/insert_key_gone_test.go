package pgdriver_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

// beforeKeyLookup runs hook once, just before the insert's read of the jobs
// whose idempotency key existed (JobGetByKeys) is sent: the moment a delete
// committed on another connection would land.
type beforeKeyLookup struct {
	armed atomic.Bool
	hook  func()
}

func (b *beforeKeyLookup) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "idempotency_key = ANY") && b.armed.CompareAndSwap(true, false) {
		b.hook()
	}
	return ctx
}

func (b *beforeKeyLookup) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestInsertKeyFreedMidBatch: a batch that names the key of a job deleted
// (here by a DLQ purge) between its insert and its read of the existing keys
// inserts that job anew and answers the batch whole, on the pool and in the
// caller's transaction. It answered an error that said to retry, after the
// rest of the batch had committed: the retry enqueued the rest twice, and in
// a transaction the rest committed with the caller's work (helper-20).
func TestInsertKeyFreedMidBatch(t *testing.T) {
	for _, inTx := range []bool{false, true} {
		t.Run(map[bool]string{false: "pool", true: "tx"}[inTx], func(t *testing.T) {
			ctx := context.Background()
			url := testdb.PostgresURL(t)
			operator := openURL(t, url)
			tr := &beforeKeyLookup{}
			pool, d := tracedDriver(t, url, tr)
			job := func(kind, key string) driver.InsertParams {
				return driver.InsertParams{Kind: kind, Queue: "q", Args: json.RawMessage(`{}`), MaxAttempts: 1, IdempotencyKey: key}
			}
			// The key's job is in the DLQ.
			if _, err := d.JobInsertMany(ctx, []driver.InsertParams{job("charge", "order-1")}); err != nil {
				t.Fatal(err)
			}
			claimed, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "w", LeaseDuration: time.Minute, Start: true})
			if err != nil || len(claimed) != 1 {
				t.Fatalf("claim: %d jobs, %v", len(claimed), err)
			}
			c := claimed[0]
			if _, err := d.JobFail(ctx, driver.FailParams{FenceParams: driver.FenceParams{ID: c.ID, Attempt: c.Attempt, LeaseToken: c.LeaseToken}, Error: "boom", Permanent: true}); err != nil {
				t.Fatal(err)
			}
			// An operator purges the DLQ while a batch naming the key is under way.
			tr.hook = func() {
				if n, err := operator.JobDLQPurge(ctx, driver.DLQPurgeParams{}); err != nil || n != 1 {
					t.Errorf("purge: %d jobs, %v", n, err)
				}
			}
			tr.armed.Store(true)
			batch := []driver.InsertParams{job("email", ""), job("charge", "order-1")}
			var res []driver.InsertResult
			if inTx {
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx)
				if res, err = d.JobInsertManyTx(ctx, tx, batch); err != nil {
					t.Fatalf("JobInsertManyTx: %v", err)
				}
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			} else if res, err = d.JobInsertMany(ctx, batch); err != nil {
				t.Fatalf("JobInsertMany: %v", err)
			}
			if tr.armed.Load() {
				t.Fatal("the purge did not run between the insert and its read")
			}
			if res[0].Job.Kind != "email" || res[1].Job.Kind != "charge" || res[1].Existing ||
				res[1].Job.ID == c.ID || res[1].Job.Status != lifecycle.StatusQueued {
				t.Errorf("results %+v %+v; want the email job and a new queued charge job", res[0].Job, res[1].Job)
			}
			emails, err := d.JobList(ctx, driver.ListParams{Kind: "email", Limit: 10})
			if err != nil || len(emails) != 1 {
				t.Errorf("email jobs: %d (%v), want 1", len(emails), err)
			}
		})
	}
}
