package pgdriver_test

import (
	"context"
	"testing"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/internal/testdb"
)

// BenchmarkCompleteMany500 times one batch completion of 500 running jobs, as a
// busy worker sends them (JobCompleteManyErrs), on a table of 200,000 jobs.
// The jobs are inserted, the table analyzed, and the jobs claimed before the
// timer starts.
func BenchmarkCompleteMany500(b *testing.B) {
	const batch = 500
	ctx := context.Background()
	d, err := pgdriver.New(ctx, testdb.PostgresURL(b), pgdriver.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Close() })
	if err := d.MigrateUp(ctx); err != nil {
		b.Fatal(err)
	}
	total := max(200_000, b.N*batch)
	ps := make([]driver.InsertParams, 1000)
	for i := range ps {
		ps[i] = driver.InsertParams{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1}
	}
	for n := 0; n < total; n += len(ps) {
		if _, err := d.JobInsertMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := d.Pool().Exec(ctx, "VACUUM ANALYZE drover_jobs"); err != nil {
		b.Fatal(err)
	}
	batches := make([][]driver.CompleteParams, b.N)
	for i := range batches {
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: batch, Owner: "w", Start: true})
		if err != nil || len(jobs) != batch {
			b.Fatalf("claimed %d (%v), want %d", len(jobs), err, batch)
		}
		for _, j := range jobs {
			batches[i] = append(batches[i], driver.CompleteParams{FenceParams: driver.FenceParams{
				ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, RequestID: "r"}})
		}
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
