package driver

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/drover-dev/drover/lifecycle"
)

// TestJobJSONRoundTrip: a job read back from the wire shape (as the CLI with
// --server and the remote worker read the API's answers) is the job that was
// written, lease token aside: no metadata stays none, a succeeded job's JSON
// null result stays its result, and a timeout keeps its milliseconds.
func TestJobJSONRoundTrip(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	base := func(status lifecycle.Status) Job {
		return Job{ID: 7, Kind: "echo", Queue: "q", Status: status, Args: json.RawMessage(`{"a":1}`),
			MaxAttempts: 3, RunAt: at, CreatedAt: at, Rev: 1, Errors: []AttemptError{}}
	}
	cases := map[string]Job{}
	queued := base(lifecycle.StatusQueued)
	queued.Timeout = 1001 * time.Millisecond
	cases["queued, no metadata, timeout 1.001s"] = queued
	meta := base(lifecycle.StatusQueued)
	meta.Metadata = json.RawMessage(`{"team":"payments"}`)
	meta.Timeout = 300 * time.Millisecond
	cases["metadata, timeout 300ms"] = meta
	nullResult := base(lifecycle.StatusSucceeded)
	nullResult.Attempt, nullResult.Executions, nullResult.Result = 1, 1, json.RawMessage("null")
	nullResult.StartedAt, nullResult.FinishedAt = &at, &at
	cases["succeeded with a null result"] = nullResult
	result := nullResult
	result.Result = json.RawMessage(`{"ok":true}`)
	cases["succeeded with a result"] = result
	failed := base(lifecycle.StatusFailed)
	failed.Attempt, failed.Executions, failed.Error = 1, 1, "boom"
	failed.Errors = []AttemptError{{Attempt: 1, At: at, Error: "boom"}}
	failed.Timeout = 2005 * time.Millisecond
	cases["failed, timeout 2.005s"] = failed
	running := base(lifecycle.StatusRunning)
	running.Attempt, running.Executions, running.Owner, running.LeaseExpiresAt = 1, 1, "w1", &at
	running.LeaseToken = "1f0e3dad-9990-4a3e-8a6b-9f4c4f5f1a2b"
	cases["running"] = running

	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(&in)
			if err != nil {
				t.Fatal(err)
			}
			var out Job
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatalf("unmarshal %s: %v", b, err)
			}
			want := in
			want.LeaseToken = "" // never on the wire
			if !reflect.DeepEqual(out, want) {
				t.Errorf("job through its JSON %s:\n got %+v\nwant %+v", b, out, want)
			}
			if err := lifecycle.CheckInvariants(out.State()); err != nil && in.LeaseToken == "" {
				t.Errorf("job read back from %s breaks the invariants: %v", b, err)
			}
		})
	}
}
