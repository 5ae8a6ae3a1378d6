package drover_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// waitTimeout bounds every wait for a job to reach a state. It is generous
// because -race on a small machine slows everything down; passing tests never
// wait that long.
const waitTimeout = 20 * time.Second

// forEachKind runs fn as a parallel subtest on every driver.
func forEachKind(t *testing.T, fn func(t *testing.T, kind string)) {
	t.Helper()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			fn(t, kind)
		})
	}
}

// newClient returns a client over a fresh, migrated database of kind.
func newClient(t *testing.T, kind string, cfg *drover.Config) *drover.Client {
	t.Helper()
	c, err := drover.NewClient(testdb.Open(t, kind), cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// fastWorkerConfig returns a worker config with short intervals, for tests.
func fastWorkerConfig(ws *drover.Workers) *drover.WorkerConfig {
	return &drover.WorkerConfig{
		ID:                "test-worker",
		Workers:           ws,
		LeaseDuration:     2 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		PollInterval:      50 * time.Millisecond,
		TimeoutGrace:      500 * time.Millisecond,
	}
}

// startWorker starts a worker and stops it (gracefully, bounded) at cleanup.
func startWorker(t *testing.T, c *drover.Client, cfg *drover.WorkerConfig) *drover.Worker {
	t.Helper()
	w, err := drover.NewWorker(c, cfg)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("Stop at cleanup: %v", err)
		}
	})
	return w
}

// enqueue enqueues one job or fails the test.
func enqueue(t *testing.T, c *drover.Client, kind string, args any, opts *drover.EnqueueOpts) *drover.Job {
	t.Helper()
	res, err := c.Enqueue(context.Background(), kind, args, opts)
	if err != nil {
		t.Fatalf("Enqueue(%q): %v", kind, err)
	}
	return res.Job
}

// getJob fetches a job or fails the test.
func getJob(t *testing.T, c *drover.Client, id int64) *drover.Job {
	t.Helper()
	j, err := c.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	return j
}

// waitJob polls job id until cond holds, failing the test after waitTimeout
// with the last state seen.
func waitJob(t *testing.T, c *drover.Client, id int64, what string, cond func(*drover.Job) bool) *drover.Job {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		j, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("waiting for job %d to be %s: Get: %v", id, what, err)
		}
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d did not become %s within %s; last seen: %s", id, what, waitTimeout, describe(j))
		}
		<-tick.C
	}
}

// waitStatus waits until job id has one of statuses and returns it.
func waitStatus(t *testing.T, c *drover.Client, id int64, statuses ...drover.JobStatus) *drover.Job {
	t.Helper()
	return waitJob(t, c, id, fmt.Sprint(statuses), func(j *drover.Job) bool {
		return slices.Contains(statuses, j.Status)
	})
}

// waitChan waits for ch to be closed or to deliver, failing the test after waitTimeout.
func waitChan[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
		var zero T
		return zero
	}
}

func describe(j *drover.Job) string {
	var errs []string
	for _, e := range j.Errors {
		errs = append(errs, fmt.Sprintf("#%d %q", e.Attempt, e.Error))
	}
	return fmt.Sprintf("status=%s attempt=%d executions=%d/%d run_at=%s error=%q errors=[%s] result=%s",
		j.Status, j.Attempt, j.Executions, j.MaxAttempts, j.RunAt.Format(time.RFC3339Nano), j.Error,
		strings.Join(errs, ", "), j.Result)
}

// wantJSON fails the test unless got and want encode the same JSON value
// (PostgreSQL's jsonb reorders keys and drops whitespace).
func wantJSON(t *testing.T, what string, got json.RawMessage, want any) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %s is not JSON: %v", what, got, err)
	}
	wb, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(wb, &w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, got, wb)
	}
}

// wantInvalid fails the test unless err is an ErrInvalidArgument whose
// *ValidationError names field.
func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want an invalid %s", field)
	}
	if !errors.Is(err, drover.ErrInvalidArgument) {
		t.Errorf("errors.Is(%v, ErrInvalidArgument) = false, want true", err)
	}
	var ve *drover.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	if ve.Field != field {
		t.Errorf("ValidationError.Field = %q, want %q (error: %v)", ve.Field, field, err)
	}
}

// wantNoJobs fails the test if the database holds any job.
func wantNoJobs(t *testing.T, c *drover.Client) {
	t.Helper()
	jobs, err := c.List(context.Background(), drover.ListParams{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(jobs) != 0 {
		t.Errorf("List returned %d jobs, want none; first: %s %s", len(jobs), jobs[0].Kind, describe(jobs[0]))
	}
}
