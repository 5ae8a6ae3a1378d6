package drover_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver/pgdriver"
)

// TestSlowCompletionsHoldBackClaims: a worker whose successes the database
// is slow to take stops claiming while they wait for their write. It claimed
// on up to its bound on jobs held (2×slots + CompletionBatch), faster than
// the one writer of its completions could write them; its successes waited
// behind each other past their leases, the reaper took them back, and they
// ran again while the worker, healthy, still held their results.
func TestSlowCompletionsHoldBackClaims(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, "postgres", nil)
	pool := c.Driver().(*pgdriver.Driver).Pool()
	// Each success costs the database 2 ms (a disk slow to take the
	// writes): the worker can complete about 500 jobs a second.
	for _, q := range []string{
		`CREATE FUNCTION slow_success() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.002); RETURN NEW; END $$`,
		`CREATE TRIGGER slow_success BEFORE UPDATE ON drover_jobs FOR EACH ROW WHEN (NEW.status = 'succeeded') EXECUTE FUNCTION slow_success()`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	engCtx, stopEngine := context.WithCancel(ctx)
	engDone := make(chan struct{})
	go func() {
		defer close(engDone)
		_ = drover.NewEngine(c, &drover.EngineConfig{ID: "engine", ReapInterval: 50 * time.Millisecond}).Run(engCtx)
	}()
	t.Cleanup(func() { stopEngine(); <-engDone })

	const n = 2500
	var mu sync.Mutex
	runs := map[int64]int{}
	ws := drover.NewWorkers()
	drover.Register(ws, "quick", func(ctx context.Context, j *drover.Job, _ struct{}) (any, error) {
		mu.Lock()
		runs[j.ID]++
		mu.Unlock()
		return nil, nil
	})
	params := make([]drover.EnqueueParams, n)
	for i := range params {
		params[i] = drover.EnqueueParams{Kind: "quick", Args: struct{}{}}
	}
	res, err := c.EnqueueMany(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastWorkerConfig(ws)
	cfg.LeaseDuration = 2 * time.Second
	cfg.HeartbeatInterval = 500 * time.Millisecond
	cfg.Queues = map[string]int{drover.DefaultQueue: 1000}
	w := startWorker(t, c, cfg)
	for _, r := range res {
		waitStatus(t, c, r.Job.ID, drover.StatusSucceeded)
	}
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for _, k := range runs {
		if k > 1 {
			twice++
		}
	}
	if twice > 0 || w.Stats().LeaseLost.Load() > 0 {
		t.Errorf("%d of %d jobs ran more than once; %d successes were refused as their lease was lost, waiting for their write", twice, n, w.Stats().LeaseLost.Load())
	}
}
