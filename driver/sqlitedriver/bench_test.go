package sqlitedriver

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-dev/drover/driver"
)

// BenchmarkInsert inserts jobs in batches of 1000, as the burn-down does.
func BenchmarkInsert(b *testing.B) {
	d := openBench(b)
	ctx := context.Background()
	b.ResetTimer()
	for n := 0; n < b.N; n += 1000 {
		if _, err := d.JobInsertMany(ctx, benchParams(1000)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimComplete claims 100 jobs with Start and completes them in one
// JobCompleteMany, as a worker with claim and completion batches of 100 does.
func BenchmarkClaimComplete(b *testing.B) {
	d := openBench(b)
	ctx := context.Background()
	for n := 0; n < b.N; n += 1000 {
		if _, err := d.JobInsertMany(ctx, benchParams(1000)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for n := 0; n < b.N; {
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"default"}, Limit: 50, Owner: "w1", LeaseDuration: time.Minute, Start: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(jobs) == 0 {
			b.Fatalf("claimed nothing after %d of %d", n, b.N)
		}
		cs := make([]driver.CompleteParams, len(jobs))
		for i, j := range jobs {
			// The worker gives every report a fresh request_id.
			cs[i] = driver.CompleteParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, RequestID: uuid.NewString()}}
		}
		for _, o := range d.JobCompleteMany(ctx, cs) {
			if o.Err != nil {
				b.Fatal(o.Err)
			}
		}
		n += len(jobs)
	}
}

// BenchmarkClaimCompleteBatches is the writer's work a job in the harness's
// burn-down: claims of 1,000 with Start, completions of 500 without a
// request_id (a library worker's), over 100k jobs inserted first. ns/op is a
// job's share of the one writer.
func BenchmarkClaimCompleteBatches(b *testing.B) {
	d := openBench(b)
	ctx := context.Background()
	for n := 0; n < 100_000; n += 1000 {
		if _, err := d.JobInsertMany(ctx, benchParams(1000)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for n := 0; n < b.N; {
		b.StopTimer()
		if n%100_000 == 0 && n > 0 { // the table ran dry: refill it
			for m := 0; m < 100_000; m += 1000 {
				if _, err := d.JobInsertMany(ctx, benchParams(1000)); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StartTimer()
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"default"}, Limit: min(1000, b.N-n), Owner: "w1", LeaseDuration: time.Minute, Start: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(jobs) == 0 {
			b.Fatalf("claimed nothing after %d of %d", n, b.N)
		}
		for i := 0; i < len(jobs); i += 500 {
			batch := jobs[i:min(i+500, len(jobs))]
			cs := make([]driver.CompleteParams, len(batch))
			for k, j := range batch {
				cs[k] = driver.CompleteParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken}}
			}
			for _, err := range d.JobCompleteManyErrs(ctx, cs) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		n += len(jobs)
	}
}

func openBench(b *testing.B) *Driver {
	b.Helper()
	d, err := Open(filepath.Join(b.TempDir(), "drover.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	if err := d.MigrateUp(context.Background()); err != nil {
		b.Fatal(err)
	}
	return d
}

func benchParams(n int) []driver.InsertParams {
	ps := make([]driver.InsertParams, n)
	for i := range ps {
		ps[i] = driver.InsertParams{Kind: "bench", Queue: "default", Args: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, i)), MaxAttempts: 25}
	}
	return ps
}

// BenchmarkClaimPastScheduledJobs claims from a queue whose 100k jobs all wait
// for a later run_at, and one due job at a later priority: what an idle
// worker's poll and the reconciler's QueuesReady cost beside a schedule. Each
// claim takes the due job, which a give-back returns.
func BenchmarkClaimPastScheduledJobs(b *testing.B) {
	d := openBench(b)
	ctx := context.Background()
	later := time.Now().Add(24 * time.Hour)
	for n := 0; n < 100_000; n += 1000 {
		ps := benchParams(1000)
		for i := range ps {
			ps[i].RunAt = &later
		}
		if _, err := d.JobInsertMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	due := benchParams(1)
	due[0].Priority = 1
	if _, err := d.JobInsertMany(ctx, due); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"default"}, Limit: 10, Owner: "w1", LeaseDuration: time.Minute})
		if err != nil || len(jobs) != 1 {
			b.Fatalf("claim = %d jobs, %v; want the one due", len(jobs), err)
		}
		j := jobs[0]
		if _, err := d.JobUnclaim(ctx, driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken}); err != nil {
			b.Fatal(err)
		}
		if ready, err := d.QueuesReady(ctx, nil); err != nil || len(ready) != 1 {
			b.Fatalf("QueuesReady = %v, %v; want [default]", ready, err)
		}
	}
}

// BenchmarkQueueList lists the queues of 300k jobs in three queues: GET
// /queues and every scrape of the drover_jobs gauge count them.
func BenchmarkQueueList(b *testing.B) {
	d := openBench(b)
	ctx := context.Background()
	for i := range 300 {
		ps := benchParams(1000)
		for k := range ps {
			ps[k].Queue = []string{"a", "b", "c"}[(i+k)%3]
		}
		if _, err := d.JobInsertMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		qs, err := d.QueueList(ctx)
		if err != nil || len(qs) != 3 {
			b.Fatalf("QueueList: %d queues, %v", len(qs), err)
		}
	}
}
