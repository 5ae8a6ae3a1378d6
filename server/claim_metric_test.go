package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
)

// A claim repeated with its request_id (its answer was lost) claims nothing:
// drover_claims_total counts the jobs claimed, once each. It counted every
// replayed task again, so a worker that resent its claims over a flaky link
// made the claim rate look like more work than was done.
func TestReplayedClaimIsNotCountedAgain(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			for range 2 {
				if code, _, b := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k","queue":"mc"}`)); code != http.StatusCreated {
					t.Fatalf("enqueue: %d %s", code, b)
				}
			}
			claim := []byte(`{"worker_id":"w","queues":["mc"],"limit":2,"request_id":"once"}`)
			for i := range 3 {
				if code, _, b := call(t, s, "POST", "/internal/task-claim", "", claim); code != http.StatusOK || strings.Count(string(b), `"task_id"`) != 2 {
					t.Fatalf("claim #%d: %d %s; want the two tasks", i+1, code, b)
				}
			}
			_, _, body := call(t, s, "GET", "/metrics", "", nil)
			if want := `drover_claims_total{queue="mc"} 2` + "\n"; !strings.Contains(string(body), want) {
				for _, line := range strings.Split(string(body), "\n") {
					if strings.HasPrefix(line, "drover_claims_total") {
						t.Log(line)
					}
				}
				t.Errorf("after one claim of 2 tasks and two replays of it, /metrics lacks %s", strings.TrimSpace(want))
			}
		})
	}
}
