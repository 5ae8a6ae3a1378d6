package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// A report whose request_id another call used is no repeat of that call: it
// is answered 409 with code conflict and a message naming request_id, and the
// job stays as it was. A "failed" report that reused the request_id of a
// "retry" the server had turned into a retry was answered 200 as a repeat, so
// the worker was told the job failed while it was queued to run again; and
// the other refusals of a reused request_id were 400s, as if the request were
// malformed, which a worker cannot tell from a body it must not resend.
func TestRequestIDOfAnotherCallIsAConflict(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			task := enqueueAndClaim(t, s)
			report := func(fields string) (int, http.Header, []byte) {
				return call(t, s, "POST", "/internal/task-complete", "", []byte(fmt.Sprintf(
					`{"task_id":%d,"attempt":%d,"lease_token":%q,"request_id":"r-1",%s}`, task.TaskID, task.Attempt, task.LeaseToken, fields)))
			}
			if code, _, b := report(`"status":"retry","error":"try again"`); code != http.StatusOK {
				t.Fatalf("retry: %d %s", code, b)
			}
			status := func() string {
				_, _, b := call(t, s, "GET", fmt.Sprintf("/jobs/%d", task.TaskID), "", nil)
				var j struct{ Status string }
				if err := json.Unmarshal(b, &j); err != nil {
					t.Fatalf("GET job: %s", b)
				}
				return j.Status
			}
			for _, c := range []struct{ what, fields string }{
				{"failed", `"status":"failed","error":"give up"`},
				{"succeeded", `"status":"succeeded","output":1`},
				{"snooze", `"status":"retry","error":"later","snooze_seconds":60`},
			} {
				code, hdr, b := report(c.fields)
				if code != http.StatusConflict {
					t.Errorf("%s with the retry's request_id: %d %s; want 409", c.what, code, b)
					continue
				}
				checkErrorBody(t, code, hdr, b)
				var e errorBody
				_ = json.Unmarshal(b, &e)
				if e.Error.Code != CodeConflict || !strings.Contains(e.Error.Message, "request_id") {
					t.Errorf("%s with the retry's request_id: code %q message %q; want code %q naming request_id",
						c.what, e.Error.Code, e.Error.Message, CodeConflict)
				}
				// A remote worker reads it as a refusal, not a lost lease.
				if re := (&drover.RemoteError{Status: code, Code: e.Error.Code}); !errors.Is(re, drover.ErrRequestReused) || errors.Is(re, drover.ErrLeaseLost) {
					t.Errorf("%s with the retry's request_id: a remote worker does not read %d %s as ErrRequestReused", c.what, code, e.Error.Code)
				}
				if hdr.Get(replayedHeader) != "" {
					t.Errorf("%s with the retry's request_id: %s = %q on a refusal", c.what, replayedHeader, hdr.Get(replayedHeader))
				}
				if st := status(); st != "queued" {
					t.Errorf("after %s with the retry's request_id: job is %s, want queued (as the retry left it)", c.what, st)
				}
			}
			// The retry repeated is its first answer.
			if code, hdr, b := report(`"status":"retry","error":"try again"`); code != http.StatusOK || hdr.Get(replayedHeader) != "true" {
				t.Errorf("retry repeated: %d %s = %q %s; want 200 and the replayed header", code, replayedHeader, hdr.Get(replayedHeader), b)
			}
			// An operator's cancel with it: 409 as well, and the job is not canceled.
			code, _, b := call(t, s, "POST", fmt.Sprintf("/jobs/%d/cancel", task.TaskID), "", []byte(`{"request_id":"r-1"}`))
			if code != http.StatusConflict || !strings.Contains(string(b), "request_id") {
				t.Errorf("cancel with the retry's request_id: %d %s; want 409 naming request_id", code, b)
			}
			if st := status(); st != "queued" {
				t.Errorf("after the cancel with the retry's request_id: job is %s, want queued", st)
			}
		})
	}
}
