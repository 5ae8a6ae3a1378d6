package drover_test

import (
	"context"
	"testing"

	"github.com/drover-dev/drover"
)

// The queues a worker runs are those NewWorker checked: a caller that changes
// its map afterwards (reusing a config for the next worker) changes nothing.
// Start ran the map as it then was, unchecked: a queue set to 0 slots was
// never claimed from, and its jobs waited for good.
func TestWorkerQueuesAreFixedAtNewWorker(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "k", func(ctx context.Context, job *drover.Job, a map[string]any) (any, error) { return "ran", nil })
		cfg := fastWorkerConfig(ws)
		cfg.Queues = map[string]int{"q": 1}
		w, err := drover.NewWorker(c, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Queues["q"] = 0           // refused by NewWorker
		cfg.Queues["not a queue"] = 1 // likewise
		if err := w.Start(context.Background()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() {
			if err := w.Stop(context.Background()); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
		j := enqueue(t, c, "k", nil, &drover.EnqueueOpts{Queue: "q"})
		waitStatus(t, c, j.ID, drover.StatusSucceeded)
	})
}
