package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// Sending A of request_id R claims nothing and is about to close R; its
// worker's connection breaks and the worker resends R (sending B), which
// claims the job and is answered it. A's close then replays B's task; it
// gave it back, A's worker being gone, and the job was queued again and
// claimed by another worker while the first ran it under B's lease
// (helper-19). It is left to B.
func TestEmptyClaimCloseGivesNothingBack(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			// The server's own collect, its close of R before it answers no tasks.
			h := &heldClaims{Driver: testdb.Open(t, kind), only: func(p driver.ClaimParams) bool { return p.ReplayOnly },
				entered: make(chan struct{}), release: make(chan struct{})}
			c, err := drover.NewClient(h, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := New(c, Config{})
			t.Cleanup(s.Close)
			claim := `{"worker_id":"w1","queues":["default"],"request_id":"R"}`

			ctx, cancel := context.WithCancel(context.Background())
			aDone := make(chan struct{})
			go func() {
				defer close(aDone)
				req := httptest.NewRequestWithContext(ctx, "POST", "/internal/task-claim", strings.NewReader(claim))
				s.ServeHTTP(httptest.NewRecorder(), req)
			}()
			<-h.entered // A claimed nothing and is about to close R
			cancel()    // A's connection broke: the worker resends

			if code, _, body := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k"}`)); code != http.StatusCreated {
				t.Fatalf("POST /jobs: %d %s", code, body)
			}
			var ans claimAnswer
			code, _, body := call(t, s, "POST", "/internal/task-claim", "", []byte(claim))
			if code != http.StatusOK || json.Unmarshal(body, &ans) != nil || len(ans.Tasks) != 1 {
				t.Fatalf("resend B: %d %s, want one task", code, body)
			}
			tk := ans.Tasks[0] // the worker runs it now
			close(h.release)
			<-aDone

			j, err := c.Get(context.Background(), tk.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			hb := fmt.Sprintf(`{"task_id":%d,"attempt":%d,"lease_token":%q}`, tk.TaskID, tk.Attempt, tk.LeaseToken)
			hbCode, _, hbBody := call(t, s, "POST", "/internal/heartbeat", "", []byte(hb))
			t.Logf("after A ended: job %d %s attempt %d; heartbeat with B's lease: %d %s", j.ID, j.Status, j.Attempt, hbCode, hbBody)
			if j.Status != drover.StatusRunning || hbCode != http.StatusOK {
				t.Errorf("the task answered to resend B was given back by sending A: job %s, heartbeat %d; want running, 200", j.Status, hbCode)
			}
			// Another worker now claims it while w1 runs it.
			code, _, body = call(t, s, "POST", "/internal/task-claim", "", []byte(`{"worker_id":"w2","queues":["default"]}`))
			t.Logf("w2 claims: %d %s", code, body)
			if strings.Contains(string(body), fmt.Sprintf(`"task_id":%d`, tk.TaskID)) {
				t.Errorf("job %d claimed by w2 while w1 runs it under B's lease: run twice at once", tk.TaskID)
			}
		})
	}
}
