package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// Two servers over one database, set to different leases (which heartbeat's
// lease_seconds is there for). A claim sent to the first (lease 2s) loses its
// answer; the worker's resend reaches the second (lease 30s), which replays
// the task and answers lease_seconds 30: the worker paces its heartbeats by a
// lease 15 times longer than the one the job holds.
// A claim committed at a server set to a 2 s lease, its answer lost, and
// resent to one set to 30 s: the replay answered lease_seconds 30 for a lease
// ending in 2 s, and a worker paced its heartbeats by 30 (helper-19). The
// replay now renews the lease for the answering server's length.
func TestReplayedClaimAnswersItsLease(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			drv := testdb.Open(t, kind)
			c, err := drover.NewClient(drv, nil)
			if err != nil {
				t.Fatal(err)
			}
			s1 := New(c, Config{LeaseDuration: 2 * time.Second})
			t.Cleanup(s1.Close)
			s2 := New(c, Config{LeaseDuration: 30 * time.Second})
			t.Cleanup(s2.Close)
			if _, err := c.Enqueue(context.Background(), "k", nil, nil); err != nil {
				t.Fatal(err)
			}
			claim := []byte(`{"worker_id":"w1","queues":["default"],"request_id":"R-mixed"}`)
			if code, _, body := call(t, s1, "POST", "/internal/task-claim", "", claim); code != http.StatusOK {
				t.Fatalf("claim at s1: %d %s", code, body) // its answer is lost
			}
			var ans claimAnswer
			code, _, body := call(t, s2, "POST", "/internal/task-claim", "", claim)
			if code != http.StatusOK || json.Unmarshal(body, &ans) != nil || len(ans.Tasks) != 1 {
				t.Fatalf("resend at s2: %d %s", code, body)
			}
			tk := ans.Tasks[0]
			left := time.Until(tk.LeaseExpiresAt)
			t.Logf("replayed=%v lease_seconds=%v, lease_expires_at in %v", ans.Replayed, tk.LeaseSeconds, left.Round(time.Millisecond))
			if time.Duration(tk.LeaseSeconds*float64(time.Second)) > left+time.Second {
				t.Errorf("replay says lease_seconds %v but the job's lease ends in %v", tk.LeaseSeconds, left)
			}
		})
	}
}
