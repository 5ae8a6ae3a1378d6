package drover_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// TestWorkerUnstorableResult: a result the database cannot store (a NUL character)
// fails the job at once with an error that says so, on both drivers, instead of
// retrying a write that can never succeed; a NUL in an error message is kept
// readable rather than refused.
func TestWorkerUnstorableResult(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			c, err := drover.NewClient(testdb.Open(t, kind), nil)
			if err != nil {
				t.Fatal(err)
			}
			ws := drover.NewWorkers()
			drover.Register(ws, "nul.result", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
				return map[string]string{"bad": "a\x00b"}, nil
			})
			drover.Register(ws, "nul.error", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
				return nil, drover.Permanent(errors.New("boom\x00boom"))
			})
			w, err := drover.NewWorker(c, &drover.WorkerConfig{Workers: ws, PollInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = w.Stop(context.Background()) })
			r1, err := c.Enqueue(context.Background(), "nul.result", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			r2, err := c.Enqueue(context.Background(), "nul.error", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			j1 := waitStatus(t, c, r1.Job.ID, drover.StatusFailed)
			if j1.Executions != 1 || !strings.Contains(j1.Error, "cannot be stored") || !strings.Contains(j1.Error, "NUL") {
				t.Errorf("unstorable result: executions %d, error %q; want one execution and an error naming the NUL", j1.Executions, j1.Error)
			}
			j2 := waitStatus(t, c, r2.Job.ID, drover.StatusFailed)
			if !strings.Contains(j2.Error, "boom") || strings.Contains(j2.Error, "\x00") {
				t.Errorf("error with a NUL: stored %q, want it kept without the NUL", j2.Error)
			}
		})
	}
}
