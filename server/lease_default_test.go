package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// A LeaseDuration of 0 or less is the default, 30 s, as the drivers take it
// (driver.DefaultLease). A negative one was kept by the server alone, whose
// claim bounds its database call by the lease: every task-claim timed out at
// once, 503 "the database did not answer in time", and no job ever ran.
func TestServerLeaseDurationBelowOneIsTheDefault(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, -time.Second} {
		s := newTestServer(t, Config{LeaseDuration: d})
		if _, err := s.client.Enqueue(context.Background(), "email", map[string]int{"n": 1}, nil); err != nil {
			t.Fatal(err)
		}
		code, _, body := call(t, s, "POST", "/internal/task-claim", "", []byte(`{"worker_id":"w","queues":["default"]}`))
		var a struct {
			Tasks []struct {
				LeaseSeconds float64 `json:"lease_seconds"`
			} `json:"tasks"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &a) != nil || len(a.Tasks) != 1 {
			t.Fatalf("LeaseDuration %s: task-claim %d %s, want one task", d, code, body)
		}
		if a.Tasks[0].LeaseSeconds != 30 {
			t.Errorf("LeaseDuration %s: lease_seconds %v, want the default 30", d, a.Tasks[0].LeaseSeconds)
		}
	}
}
