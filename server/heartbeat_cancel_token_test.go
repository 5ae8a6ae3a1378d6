package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
)

// A worker's heartbeat of a job an operator canceled: the holder of the
// canceled attempt's lease is answered 200 with cancel_requested, a wrong
// lease token at the same attempt 409 (a stale fence), as before the cancel.
// The cancel clears the row's token and the drivers checked only the
// attempt, so any token was answered 200 and cancel_requested.
func TestHeartbeatOfACanceledJobChecksTheToken(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			if code, _, body := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k"}`)); code != http.StatusCreated {
				t.Fatalf("POST /jobs: %d %s", code, body)
			}
			var ans claimAnswer
			code, _, body := call(t, s, "POST", "/internal/task-claim", "", []byte(`{"worker_id":"w1","queues":["default"]}`))
			if code != http.StatusOK || json.Unmarshal(body, &ans) != nil || len(ans.Tasks) != 1 {
				t.Fatalf("claim: %d %s, want one task", code, body)
			}
			tk := ans.Tasks[0]
			if code, _, body := call(t, s, "POST", fmt.Sprintf("/jobs/%d/cancel", tk.TaskID), "", nil); code != http.StatusOK {
				t.Fatalf("cancel: %d %s", code, body)
			}
			beat := func(token string) (int, []byte) {
				hb := fmt.Sprintf(`{"task_id":%d,"attempt":%d,"lease_token":%q}`, tk.TaskID, tk.Attempt, token)
				code, _, body := call(t, s, "POST", "/internal/heartbeat", "", []byte(hb))
				return code, body
			}
			const wrong = "00000000-0000-4000-8000-000000000000"
			if code, body := beat(wrong); code != http.StatusConflict {
				t.Errorf("heartbeat of the canceled job with a wrong token: %d %s, want 409", code, body)
			}
			code, body = beat(tk.LeaseToken)
			var res struct {
				CancelRequested bool `json:"cancel_requested"`
			}
			if code != http.StatusOK || json.Unmarshal(body, &res) != nil || !res.CancelRequested {
				t.Errorf("heartbeat of the canceled job by its holder: %d %s, want 200 and cancel_requested", code, body)
			}
		})
	}
}
