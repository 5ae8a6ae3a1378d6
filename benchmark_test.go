package drover_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
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

// instantJobs is a real driver whose claims and batched completions answer at
// once, without the database: BenchmarkWorkerOverhead measures only what the
// worker itself spends per job.
type instantJobs struct {
	driver.Driver
	next atomic.Int64
}

func (d *instantJobs) JobClaim(_ context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	jobs := make([]*driver.Job, p.Limit)
	for i := range jobs {
		jobs[i] = &driver.Job{
			ID: d.next.Add(1), Kind: "noop", Queue: p.Queues[0], Status: drover.StatusRunning,
			Args: json.RawMessage(`{"seq":1}`), Attempt: 1, Executions: 1, MaxAttempts: 25,
			Owner: p.Owner, LeaseToken: uuid.NewString(),
		}
	}
	return jobs, nil
}

func (d *instantJobs) JobCompleteManyErrs(_ context.Context, p []driver.CompleteParams) []error {
	return make([]error, len(p))
}

type countFinished struct {
	left atomic.Int64
	done chan struct{}
}

func (c *countFinished) Claimed(string, int)   {}
func (c *countFinished) LeaseLost(*drover.Job) {}
func (c *countFinished) Finished(*drover.Job, string, time.Duration) {
	if c.left.Add(-1) == 0 {
		close(c.done)
	}
}

// BenchmarkWorkerOverhead measures the worker's own cost per no-op job, with the
// database taken out (instantJobs): claiming hands over jobs at once and
// completions are stored at once. Concurrency and batches are bench/compare's.
// ns/op, B/op and allocs/op are per job.
func BenchmarkWorkerOverhead(b *testing.B) {
	drv := &instantJobs{Driver: testdb.Open(b, "sqlite")}
	c, err := drover.NewClient(drv, nil)
	if err != nil {
		b.Fatal(err)
	}
	workers := drover.NewWorkers()
	drover.Register(workers, "noop", func(ctx context.Context, job *drover.Job, args struct{ Seq int64 }) (any, error) {
		return nil, nil
	})
	count := &countFinished{done: make(chan struct{})}
	count.left.Store(int64(b.N))
	w, err := drover.NewWorker(c, &drover.WorkerConfig{
		Queues: map[string]int{drover.DefaultQueue: 2000}, Workers: workers, ClaimBatch: 1000, CompletionBatch: 500,
		PollInterval: time.Second, Logger: slog.New(slog.DiscardHandler), Observer: count,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := w.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	<-count.done
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = w.Stop(ctx) // the instant claims keep handing out jobs until the stop
}
