package drover_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/drover-dev/drover"
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
