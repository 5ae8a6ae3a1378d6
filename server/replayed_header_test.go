package server

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
)

// An answer to a repeated request (an idempotency key, a request_id) carries
// Idempotent-Replayed: true, and the first answer does not: a client that lost
// the first answer can tell that nothing was done again.
func TestReplayedAnswersSaySo(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			twice := func(what, target, body string, first, again int) {
				t.Helper()
				for i, want := range []int{first, again} {
					code, hdr, b := call(t, s, "POST", target, "", []byte(body))
					if code != want {
						t.Fatalf("%s #%d: %d %s; want %d", what, i+1, code, b, want)
					}
					if got, wantHdr := hdr.Get(replayedHeader), map[int]string{0: "", 1: "true"}[i]; got != wantHdr {
						t.Errorf("%s #%d: %s = %q, want %q", what, i+1, replayedHeader, got, wantHdr)
					}
				}
			}
			twice("enqueue with a key", "/jobs", `{"kind":"k","idempotency_key":"order-1","run_at":"2030-01-01T00:00:00Z"}`,
				http.StatusCreated, http.StatusOK)
			twice("cancel with a request_id", "/jobs/1/cancel", `{"request_id":"c-1"}`, http.StatusOK, http.StatusOK)

			task := enqueueAndClaim(t, s)
			twice("task-complete with a request_id", "/internal/task-complete", fmt.Sprintf(
				`{"task_id":%d,"attempt":1,"lease_token":%q,"status":"succeeded","output":1,"request_id":"r-1"}`,
				task.TaskID, task.LeaseToken), http.StatusOK, http.StatusOK)
		})
	}
}
