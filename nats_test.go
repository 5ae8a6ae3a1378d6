package drover_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver/sqlitedriver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
	"github.com/drover-dev/drover/wakeup"
)

// TestNATSWakeupsLoseAndDoubleNothing runs jobs end to end with NATS JetStream as
// the wake-up transport while pointers are dropped, duplicated and left unacked:
// every job still runs exactly once. On SQLite the client and the worker use
// separate driver instances, so the driver's in-process wake-ups cannot reach the
// worker and polling is an hour away: jobs flow because of NATS (or, for dropped
// pointers, the engine's reconciler republishing through NATS).
func TestNATSWakeupsLoseAndDoubleNothing(t *testing.T) {
	t.Parallel()
	url := testdb.NATSURL(t)
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dbURL := testdb.URL(t, kind)
			clientDrv := testdb.OpenURL(t, kind, dbURL)
			workerDrv := clientDrv
			if kind == "sqlite" {
				d, err := sqlitedriver.Open(dbURL, sqlitedriver.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = d.Close() })
				workerDrv = d
			}
			stream := fmt.Sprintf("DROVER_TEST_%d", time.Now().UnixNano())
			var published, dropped, duplicated, unacked atomic.Int64
			opts := wakeup.NATSOptions{
				Stream: stream, SubjectPrefix: "drovertest." + stream, AckWait: time.Second, MemoryStorage: true,
				DropPublish: func(p wakeup.Pointer) bool {
					if p.JobID != 0 && published.Add(1)%4 == 0 {
						dropped.Add(1)
						return true
					}
					return false
				},
				DuplicatePublish: func(p wakeup.Pointer) bool {
					if p.JobID != 0 && p.JobID%5 == 0 {
						duplicated.Add(1)
						return true
					}
					return false
				},
				DropAck: func(m wakeup.Message) bool {
					if m.JobID != 0 && m.JobID%7 == 0 && unacked.Load() < 5 {
						unacked.Add(1)
						return true
					}
					return false
				},
			}
			tr, err := wakeup.NewNATS(ctx, url, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tr.Close() })

			client, err := drover.NewClient(clientDrv, &drover.Config{Wakeups: tr})
			if err != nil {
				t.Fatal(err)
			}
			workerClient, err := drover.NewClient(workerDrv, nil)
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int64
			workers := drover.NewWorkers()
			drover.Register(workers, "nats.job", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
				runs.Add(1)
				return nil, nil
			})
			w, err := drover.NewWorker(workerClient, &drover.WorkerConfig{
				Queues: map[string]int{"natsq": 8}, Workers: workers, Wakeups: tr, PollInterval: time.Hour,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = w.Stop(context.Background()) })
			// The engine shares the client's driver instance: on SQLite its in-process
			// wake-ups cannot reach the worker either, only its NATS pointers can.
			engine := drover.NewEngine(client, &drover.EngineConfig{
				LeaderTTL: time.Second, ReconcileInterval: 300 * time.Millisecond, Wakeups: tr,
			})
			engineCtx, stopEngine := context.WithCancel(ctx)
			engineDone := make(chan struct{})
			go func() { defer close(engineDone); engine.Run(engineCtx) }()
			t.Cleanup(func() { stopEngine(); <-engineDone })

			const n = 60
			ids := make([]int64, 0, n)
			for i := 0; i < n; i++ { // one at a time, so pointers arrive while others run
				res, err := client.Enqueue(ctx, "nats.job", map[string]int{"i": i}, &drover.EnqueueOpts{Queue: "natsq"})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, res.Job.ID)
			}
			deadline := time.Now().Add(90 * time.Second)
			for w.Stats().Succeeded.Load() < n {
				if time.Now().After(deadline) {
					t.Fatalf("only %d of %d jobs succeeded (dropped %d, duplicated %d, unacked %d)",
						w.Stats().Succeeded.Load(), n, dropped.Load(), duplicated.Load(), unacked.Load())
				}
				time.Sleep(20 * time.Millisecond) // polling a counter with a deadline
			}
			if dropped.Load() == 0 || duplicated.Load() == 0 {
				t.Fatalf("fault injection did not fire: dropped %d, duplicated %d", dropped.Load(), duplicated.Load())
			}
			if got := runs.Load(); got != n {
				t.Errorf("handlers ran %d times for %d jobs, want exactly once each", got, n)
			}
			for _, id := range ids {
				j, err := client.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				evs, err := client.Events(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				claims := 0
				for _, e := range evs {
					if e.Type == lifecycle.EventClaimed {
						claims++
					}
				}
				if j.Status != drover.StatusSucceeded || j.Attempt != 1 || claims != 1 {
					t.Errorf("job %d: %s attempt %d with %d claims, want succeeded once", id, j.Status, j.Attempt, claims)
				}
				if err := lifecycle.CheckHistory(evs); err != nil {
					t.Errorf("job %d: %v", id, err)
				}
			}
			t.Logf("%d jobs: %d pointers dropped, %d duplicated, %d left unacked; all ran once", n, dropped.Load(), duplicated.Load(), unacked.Load())
		})
	}
}
