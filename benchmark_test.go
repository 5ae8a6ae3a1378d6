package drover_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// BenchmarkEnqueueMany measures batched enqueue, 100 jobs a statement; ns/op is per job.
func BenchmarkEnqueueMany(b *testing.B) {
	for _, kind := range testdb.Kinds {
		b.Run(kind, func(b *testing.B) {
			c, err := drover.NewClient(testdb.Open(b, kind), nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			batch := make([]drover.EnqueueParams, 100)
			for i := range batch {
				batch[i] = drover.EnqueueParams{Kind: "bench", Args: map[string]int{"i": i}}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += len(batch) {
				if _, err := c.EnqueueMany(ctx, batch[:min(len(batch), b.N-i)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWorkNoop measures a worker (concurrency 50) working b.N pre-inserted
// no-op jobs to the end: claim, start and complete, each fenced and logged.
func BenchmarkWorkNoop(b *testing.B) {
	for _, kind := range testdb.Kinds {
		b.Run(kind, func(b *testing.B) {
			c, err := drover.NewClient(testdb.Open(b, kind), nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			params := make([]drover.EnqueueParams, 0, 1000)
			for i := 0; i < b.N; i++ {
				params = append(params, drover.EnqueueParams{Kind: "noop"})
				if len(params) == cap(params) || i == b.N-1 {
					if _, err := c.EnqueueMany(ctx, params); err != nil {
						b.Fatal(err)
					}
					params = params[:0]
				}
			}
			finished := make(chan struct{})
			workers := drover.NewWorkers()
			drover.Register(workers, "noop", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
				return nil, nil
			})
			w, err := drover.NewWorker(c, &drover.WorkerConfig{
				Queues: map[string]int{drover.DefaultQueue: 50}, Workers: workers, ClaimBatch: 50,
				PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			if err := w.Start(ctx); err != nil {
				b.Fatal(err)
			}
			go func() {
				t := time.NewTicker(time.Millisecond)
				defer t.Stop()
				for range t.C {
					if w.Stats().Succeeded.Load() >= int64(b.N) {
						close(finished)
						return
					}
				}
			}()
			<-finished
			b.StopTimer()
			if err := w.Stop(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
			if got := w.Stats().Succeeded.Load(); got != int64(b.N) {
				b.Fatalf("succeeded %d, want %d", got, b.N)
			}
		})
	}
}
