package pgdriver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
)

// BenchmarkCompleteMany500 times one batch completion of 500 running jobs, as a
// busy worker sends them (JobCompleteManyErrs), on a table of 200,000 jobs.
// The jobs are inserted, the table analyzed, and the jobs claimed before the
// timer starts.
func BenchmarkCompleteMany500(b *testing.B) {
	const batch = 500
	ctx := context.Background()
	d := open(b)
	insertWaiting(b, d, max(200_000, b.N*batch))
	if _, err := d.Pool().Exec(ctx, "VACUUM ANALYZE drover_jobs"); err != nil {
		b.Fatal(err)
	}
	batches := make([][]driver.CompleteParams, b.N)
	for i := range batches {
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: batch, Owner: "w", Start: true})
		if err != nil || len(jobs) != batch {
			b.Fatalf("claimed %d (%v), want %d", len(jobs), err, batch)
		}
		batches[i] = completions(jobs)
	}
	b.ResetTimer()
	for i := range b.N {
		for _, err := range d.JobCompleteManyErrs(ctx, batches[i]) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/job")
}

// BenchmarkInsertMany1000 times one insert of 1,000 jobs: without idempotency
// keys (the statement has no ON CONFLICT clause) and with a fresh key on each
// job (it has one, and PostgreSQL inserts each row speculatively).
func BenchmarkInsertMany1000(b *testing.B) {
	const batch = 1000
	for _, keyed := range []bool{false, true} {
		name := "unkeyed"
		if keyed {
			name = "keyed"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			d := open(b)
			ps := make([]driver.InsertParams, batch)
			b.ResetTimer()
			for i := range b.N {
				for j := range ps {
					ps[j] = driver.InsertParams{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1}
					if keyed {
						ps[j].IdempotencyKey = fmt.Sprintf("%s-%d-%d", b.Name(), i, j)
					}
				}
				if _, err := d.JobInsertMany(ctx, ps); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/job")
		})
	}
}

// BenchmarkQueuesReadyPastScheduledJobs times the reconciler's QueuesReady
// (once a second on the leader) for a queue of 200,000 jobs scheduled for
// tomorrow and one due job at a later priority.
func BenchmarkQueuesReadyPastScheduledJobs(b *testing.B) {
	ctx := context.Background()
	d := open(b)
	later := time.Now().Add(24 * time.Hour)
	for n := 0; n < 200_000; n += 1000 {
		ps := make([]driver.InsertParams, 1000)
		for i := range ps {
			ps[i] = driver.InsertParams{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1, RunAt: &later}
		}
		if _, err := d.JobInsertMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := d.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1, Priority: 1}}); err != nil {
		b.Fatal(err)
	}
	if _, err := d.Pool().Exec(ctx, "VACUUM ANALYZE drover_ready"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if ready, err := d.QueuesReady(ctx, nil); err != nil || len(ready) != 1 {
			b.Fatalf("QueuesReady = %v, %v; want [q]", ready, err)
		}
	}
}
