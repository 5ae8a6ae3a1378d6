package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Field names are matched exactly: encoding/json alone takes {"KIND": …} as
// kind, and lets a second spelling of a name win over the first. And the
// reasons name what the field wants.
func TestRequestFieldsAreCaseSensitiveAndReasonsAreExact(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, Config{})
	for _, tc := range []struct {
		target, body, want string
	}{
		{"/jobs", `{"KIND":"k"}`, `unknown field "KIND" (field names are case-sensitive: "kind")`},
		{"/jobs", `{"kind":"k","Queue":"other"}`, `unknown field "Queue"`},
		{"/jobs", `{"kind":"a","KIND":"b"}`, `unknown field "KIND"`},
		{"/internal/task-claim", `{"Worker_ID":"w","queues":["q"]}`, `unknown field "Worker_ID"`},
		{"/internal/task-complete", `{"TASK_ID":1,"attempt":1,"lease_token":"x","status":"succeeded"}`, `unknown field "TASK_ID"`},
		{"/jobs", `{"kind":"k","priority":1.5}`, "invalid priority: got number 1.5, want an integer"},
		{"/jobs", `{"kind":"k","timeout_seconds":1e-10}`, "invalid timeout_seconds: 1e-10, must be 0.001"},
		{"/jobs", `{"kind":"k","timeout_seconds":0.0005}`, "invalid timeout_seconds: 0.0005, must be 0.001"},
		{"/internal/heartbeat", `{"task_id":-5,"attempt":1,"lease_token":"x"}`, "invalid task_id: -5, must be a positive integer"},
		{"/internal/heartbeat", `{"task_id":5,"attempt":0,"lease_token":"x"}`, "invalid attempt: 0 is not an attempt a claim returned"},
	} {
		status, hdr, b := call(t, s, http.MethodPost, tc.target, "", []byte(tc.body))
		var e errorBody
		_ = json.Unmarshal(b, &e)
		if status != http.StatusBadRequest || !strings.Contains(e.Error.Message, tc.want) {
			t.Errorf("POST %s %s = %d %s, want 400 with %q", tc.target, tc.body, status, b, tc.want)
			continue
		}
		checkErrorBody(t, status, hdr, b)
	}
	// The exact names still work, with a timeout at the resolution.
	if status, _, b := call(t, s, http.MethodPost, "/jobs", "", []byte(`{"kind":"k","queue":"q","timeout_seconds":0.001}`)); status != http.StatusCreated {
		t.Errorf("POST /jobs with exact names = %d %s, want 201", status, b)
	}
}
