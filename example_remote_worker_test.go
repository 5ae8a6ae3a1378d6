package drover_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/drover-dev/drover"
)

// A worker in a process that has no database access: it claims, heartbeats and
// reports through a Drover server (drover server --worker-token …). Handlers are
// registered exactly as for a local worker.
func ExampleNewRemoteWorker() {
	workers := drover.NewWorkers()
	drover.Register(workers, "email", func(ctx context.Context, job *drover.Job, a struct{ To string }) (any, error) {
		if a.To == "" {
			return nil, drover.Permanent(errors.New("no recipient")) // no retry: straight to the DLQ
		}
		return map[string]string{"sent_to": a.To}, nil
	})
	worker, err := drover.NewRemoteWorker(
		drover.RemoteConfig{URL: "http://127.0.0.1:7420", Token: "worker-token"},
		&drover.WorkerConfig{Workers: workers, Queues: map[string]int{"default": 20}},
	)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithTimeout(context.Background(), time.Minute) // e.g. signal.NotifyContext
	defer stop()
	// Runs until ctx ends, then stops gracefully, waiting up to 30s for running jobs.
	if err := worker.Run(ctx, 30*time.Second); err != nil {
		log.Print(err)
	}
}
