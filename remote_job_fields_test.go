package drover_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/server"
)

// TestRemoteHandlerGetsTheJobsIdempotencyKeyAndMetadata: a handler on a
// remote worker gets the idempotency key and metadata its job was enqueued
// with, as a handler on a local worker does. The claim answer left them out,
// so a handler passing job.IdempotencyKey on to a payment provider sent none
// there, and a retry could charge twice.
func TestRemoteHandlerGetsTheJobsIdempotencyKeyAndMetadata(t *testing.T) {
	type seen struct {
		Key      string          `json:"key"`
		Metadata json.RawMessage `json:"metadata"`
	}
	ws := drover.NewWorkers()
	drover.Register(ws, "charge", func(_ context.Context, j *drover.Job, _ struct{}) (any, error) {
		return seen{j.IdempotencyKey, j.Metadata}, nil
	})
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{})
		startRemoteWorker(t, drover.RemoteConfig{URL: ts.url}, fastWorkerConfig(ws))
		for _, tc := range []struct {
			opts *drover.EnqueueOpts
			want seen
		}{
			{&drover.EnqueueOpts{IdempotencyKey: "charge-42 😀", Metadata: json.RawMessage(`{"trace":"abc","n":12345678901234567890}`)},
				seen{"charge-42 😀", json.RawMessage(`{"n":12345678901234567890,"trace":"abc"}`)}},
			{nil, seen{}},
		} {
			j := enqueue(t, ts.c, "charge", nil, tc.opts)
			j = waitStatus(t, ts.c, j.ID, drover.StatusSucceeded, drover.StatusFailed)
			var got seen
			if err := json.Unmarshal(j.Result, &got); err != nil || j.Status != drover.StatusSucceeded {
				t.Fatalf("job %d: %s (%v)", j.ID, describe(j), err)
			}
			if got.Key != tc.want.Key || canonJSON(t, got.Metadata) != canonJSON(t, tc.want.Metadata) {
				t.Errorf("the remote handler got idempotency key %q and metadata %s; want %q and %s (as enqueued)",
					got.Key, got.Metadata, tc.want.Key, tc.want.Metadata)
			}
		}
	})
}

// canonJSON is raw with its keys sorted and spacing dropped, numbers as given;
// "" for none (absent or null).
func canonJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestRemoteHandlerGetsTheJobsRunAtStartedAtErrorsAndRetryOf: a handler on a
// remote worker gets its job's run_at, started_at, the earlier attempts'
// errors and retry_of, as a handler on a local worker does. The task left
// them out: a handler that looks at the last attempt's error on a retry (to
// resume a half-done transfer, say) saw none on a remote worker, and a job
// requeued from the DLQ did not know what it copied.
func TestRemoteHandlerGetsTheJobsRunAtStartedAtErrorsAndRetryOf(t *testing.T) {
	type seen struct {
		RunAt     time.Time             `json:"run_at"`
		StartedAt *time.Time            `json:"started_at"`
		Errors    []driver.AttemptError `json:"errors"`
		RetryOf   *int64                `json:"retry_of"`
	}
	ws := drover.NewWorkers()
	drover.Register(ws, "flaky", func(_ context.Context, j *drover.Job, a struct{ FailFirst bool }) (any, error) {
		if a.FailFirst && j.Attempt == 1 && j.RetryOf == nil {
			return nil, errors.New("boom on the first attempt")
		}
		return seen{j.RunAt, j.StartedAt, j.Errors, j.RetryOf}, nil
	}, noBackoff)
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{})
		startRemoteWorker(t, drover.RemoteConfig{URL: ts.url}, fastWorkerConfig(ws))
		ctx := context.Background()
		check := func(what string, j *drover.Job) seen {
			t.Helper()
			var got seen
			if err := json.Unmarshal(j.Result, &got); err != nil || j.Status != drover.StatusSucceeded {
				t.Fatalf("%s: job %d: %s (%v)", what, j.ID, describe(j), err)
			}
			if !got.RunAt.Equal(j.RunAt) || got.StartedAt == nil || j.StartedAt == nil || !got.StartedAt.Equal(*j.StartedAt) {
				t.Errorf("%s: the remote handler got run_at %s, started_at %v; the job has %s, %v",
					what, got.RunAt, got.StartedAt, j.RunAt, j.StartedAt)
			}
			return got
		}

		// A first attempt that failed: the second sees its error.
		j := enqueue(t, ts.c, "flaky", map[string]bool{"failfirst": true}, &drover.EnqueueOpts{MaxAttempts: 3})
		j = waitStatus(t, ts.c, j.ID, drover.StatusSucceeded, drover.StatusFailed)
		got := check("retried job", j)
		if len(got.Errors) != 1 || got.Errors[0].Attempt != 1 || got.Errors[0].Error != "boom on the first attempt" || got.Errors[0].At.IsZero() {
			t.Errorf("the remote handler of attempt 2 got errors %+v; want attempt 1's, %q", got.Errors, "boom on the first attempt")
		}
		if got.RetryOf != nil {
			t.Errorf("retry_of %d, want none", *got.RetryOf)
		}

		// A first attempt: no errors, as [] (not null, as a local job has it).
		j = waitStatus(t, ts.c, enqueue(t, ts.c, "flaky", nil, nil).ID, drover.StatusSucceeded, drover.StatusFailed)
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(j.Result, &fields); err != nil || strings.TrimSpace(string(fields["errors"])) != "[]" {
			t.Errorf("first attempt: result %s (%v), want errors []", j.Result, err)
		}
		check("first attempt", j)

		// A DLQ requeue: the copy knows what it copied.
		dead := enqueue(t, ts.c, "flaky", map[string]bool{"failfirst": true}, &drover.EnqueueOpts{MaxAttempts: 1})
		waitStatus(t, ts.c, dead.ID, drover.StatusFailed)
		copied, err := ts.c.DLQRequeue(ctx, dead.ID)
		if err != nil {
			t.Fatal(err)
		}
		got = check("requeued job", waitStatus(t, ts.c, copied.ID, drover.StatusSucceeded, drover.StatusFailed))
		if got.RetryOf == nil || *got.RetryOf != dead.ID {
			t.Errorf("the requeued job's remote handler got retry_of %v, want %d", got.RetryOf, dead.ID)
		}
	})
}
