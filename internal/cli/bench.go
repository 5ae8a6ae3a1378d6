package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
)

// benchResult is the output of drover bench; -o json prints exactly these fields.
type benchResult struct {
	Driver          string  `json:"driver"`
	Jobs            int     `json:"jobs"`
	Concurrency     int     `json:"concurrency"`
	ClaimBatch      int     `json:"claim_batch"`      // most jobs one claim took
	CompletionBatch int     `json:"completion_batch"` // most completions one transaction wrote
	Rate            int     `json:"rate,omitempty"`   // offered jobs/s; 0: all at once (burn-down)
	Seconds         float64 `json:"seconds"`
	JobsPerSecond   float64 `json:"jobs_per_second"`
	EnqueueSeconds  float64 `json:"enqueue_seconds"`
	LatencyP50MS    float64 `json:"latency_p50_ms"`
	LatencyP99MS    float64 `json:"latency_p99_ms"`
}

func newBenchCmd(g *globals) *cobra.Command {
	var jobs, concurrency, batch, rate, claimBatch, completionBatch int
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Enqueue N no-op jobs while a worker works them; print jobs/s and enqueue→start latency",
		Long: "Starts a worker, enqueues --jobs no-op jobs in batches on a fresh queue, and waits until all\n" +
			"succeeded. Throughput is jobs / seconds from the first enqueue to the last completion;\n" +
			"latency is from a job's created_at to its handler starting.\n" +
			"Without --database-url (or DROVER_DATABASE_URL) it uses a fresh SQLite file in a temporary directory,\n" +
			"not the default ./drover.db listed below, so that a bench never fills a dev database.",
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if jobs < 1 {
				return driver.Invalid("jobs", "%d, must be at least 1", jobs)
			}
			if concurrency < 1 || concurrency > drover.MaxConcurrency {
				return driver.Invalid("concurrency", "%d, must be 1 to %d", concurrency, drover.MaxConcurrency)
			}
			if batch < 1 {
				return driver.Invalid("batch", "%d, must be at least 1", batch)
			}
			if rate < 0 {
				return driver.Invalid("rate", "%d is negative", rate)
			}
			if claimBatch < 0 {
				return driver.Invalid("claim-batch", "%d is negative (0: the default)", claimBatch)
			}
			if completionBatch < 0 || completionBatch > drover.MaxCompletionBatch {
				return driver.Invalid("completion-batch", "%d, must be 0 (the default) to %d", completionBatch, drover.MaxCompletionBatch)
			}
			if !cmd.Flags().Changed("database-url") && os.Getenv("DROVER_DATABASE_URL") == "" {
				dir, err := os.MkdirTemp("", "drover-bench-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				g.databaseURL = filepath.Join(dir, "bench.db")
			}
			res, err := g.bench(cmd.Context(), benchParams{jobs: jobs, concurrency: concurrency, batch: batch, rate: rate,
				claimBatch: claimBatch, completionBatch: completionBatch})
			if err != nil {
				return err
			}
			if g.output == "json" {
				return g.json(res)
			}
			fmt.Fprintf(g.stdout, "driver:        %s\njobs:          %d (concurrency %d, claims of up to %d, completions of up to %d)\nseconds:       %.2f\njobs/s:        %.0f\nenqueue:       %.2fs\nlatency p50:   %.1f ms\nlatency p99:   %.1f ms\n",
				res.Driver, res.Jobs, res.Concurrency, res.ClaimBatch, res.CompletionBatch, res.Seconds, res.JobsPerSecond, res.EnqueueSeconds, res.LatencyP50MS, res.LatencyP99MS)
			return nil
		},
	}
	cmd.Flags().IntVar(&jobs, "jobs", 10000, "number of no-op jobs")
	cmd.Flags().IntVar(&concurrency, "concurrency", 50, "jobs worked at once")
	cmd.Flags().IntVar(&batch, "batch", 500, "jobs per enqueue statement")
	cmd.Flags().IntVar(&rate, "rate", 0, "offer this many jobs/s (in 10ms ticks) instead of all at once, to measure latency below saturation")
	cmd.Flags().IntVar(&claimBatch, "claim-batch", 0, "most jobs one claim takes (WorkerConfig.ClaimBatch; 0: the concurrency, at most 100)")
	cmd.Flags().IntVar(&completionBatch, "completion-batch", 0, "most completions one transaction writes (WorkerConfig.CompletionBatch; 0: 100)")
	return cmd
}

// benchParams are drover bench's flags.
type benchParams struct {
	jobs, concurrency, batch, rate int
	claimBatch, completionBatch    int // 0: the worker's defaults
}

func (g *globals) bench(ctx context.Context, p benchParams) (*benchResult, error) {
	n, concurrency, batch, rate := p.jobs, p.concurrency, p.batch, p.rate
	claimBatch := p.claimBatch
	if claimBatch == 0 {
		claimBatch = min(concurrency, 100)
	}
	completionBatch := p.completionBatch
	if completionBatch == 0 {
		completionBatch = 100
	}
	c, drv, err := g.open(ctx, true)
	if err != nil {
		return nil, err
	}
	defer drv.Close()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	queue := "bench-" + hex.EncodeToString(b)

	latencies := make([]time.Duration, n)
	var started atomic.Int64
	workers := drover.NewWorkers()
	drover.Register(workers, "bench.noop", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
		if i := started.Add(1) - 1; int(i) < n {
			latencies[i] = time.Since(job.CreatedAt)
		}
		return nil, nil
	})
	w, err := drover.NewWorker(c, &drover.WorkerConfig{
		Queues: map[string]int{queue: concurrency}, Workers: workers, ClaimBatch: claimBatch, CompletionBatch: completionBatch,
		PollInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop(context.Background()) }()

	begin := time.Now()
	if err := enqueueBench(ctx, c, queue, n, batch, rate); err != nil {
		return nil, err
	}
	enqueued := time.Since(begin)

	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for w.Stats().Succeeded.Load() < int64(n) {
		select {
		case <-ctx.Done():
			// Wrapped, so a signal's cut exits 130 here too (mainWith), as it
			// does during the enqueue; it exited 1, as for a failure.
			return nil, fmt.Errorf("interrupted after %d of %d jobs: %w", w.Stats().Succeeded.Load(), n, ctx.Err())
		case <-tick.C:
		}
	}
	elapsed := time.Since(begin)
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) float64 { return float64(benchPercentile(latencies, p).Microseconds()) / 1000 }
	return &benchResult{
		Driver: drv.Name(), Jobs: n, Concurrency: concurrency, ClaimBatch: min(claimBatch, concurrency),
		CompletionBatch: completionBatch, Rate: rate, Seconds: elapsed.Seconds(),
		JobsPerSecond: float64(n) / elapsed.Seconds(), EnqueueSeconds: enqueued.Seconds(),
		LatencyP50MS: pct(0.50), LatencyP99MS: pct(0.99),
	}, nil
}

// enqueueBench enqueues n jobs in batches, all at once or at rate jobs/s.
func enqueueBench(ctx context.Context, c *drover.Client, queue string, n, batch, rate int) error {
	send := func(k int) error {
		params := make([]drover.EnqueueParams, k)
		for i := range params {
			params[i] = drover.EnqueueParams{Kind: "bench.noop", Opts: &drover.EnqueueOpts{Queue: queue}}
		}
		if _, err := c.EnqueueMany(ctx, params); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		return nil
	}
	if rate == 0 {
		for sent := 0; sent < n; sent += batch {
			if err := send(min(batch, n-sent)); err != nil {
				return err
			}
		}
		return nil
	}
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	for sent := 0; sent < n; {
		due := min(n, int(float64(rate)*time.Since(start).Seconds())+1)
		if due > sent {
			if err := send(due - sent); err != nil {
				return err
			}
			sent = due
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// benchPercentile is the p-th percentile (0 < p ≤ 1) of sorted, by nearest
// rank: the smallest sample with at least p of them at or below it. The index
// p×n took the next one up: of 100 samples, the p99 was the largest.
func benchPercentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p*float64(len(sorted)) - 1e-9)) // 1-based
	return sorted[max(0, min(rank, len(sorted))-1)]
}
