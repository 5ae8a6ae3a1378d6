package server

import (
	"strings"
	"testing"
)

// A wrong type or an out-of-range number in a field of an embedded struct
// is named by its JSON name alone: encoding/json puts the Go type's name in
// front ("invalid fenceRequest.task_id"), which no client sent or can look up.
func TestDecodeErrorNamesEmbeddedFieldsByTheirJSONName(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, Config{})
	for _, tc := range []struct{ target, body, want string }{
		{"/internal/task-complete", `{"task_id":99999999999999999999,"attempt":1,"lease_token":"x","status":"succeeded"}`,
			"invalid task_id: 99999999999999999999 is out of range"},
		{"/internal/task-complete", `{"task_id":"1","attempt":1,"lease_token":"x","status":"succeeded"}`,
			"invalid task_id: got string, want an integer"},
		{"/internal/task-complete", `{"task_id":1,"attempt":1.5,"lease_token":"x","status":"succeeded"}`,
			"invalid attempt: got number 1.5, want an integer"},
		{"/internal/task-complete", `{"task_id":1,"attempt":1,"lease_token":7,"status":"succeeded"}`,
			"invalid lease_token: got number, want a string"},
		{"/internal/heartbeat", `{"task_id":true,"attempt":1,"lease_token":"x"}`,
			"invalid task_id: got bool, want an integer"},
		// Not embedded: as before.
		{"/internal/task-complete", `{"task_id":1,"attempt":1,"lease_token":"x","status":7}`,
			"invalid status: got number, want a string"},
		{"/jobs", `{"kind":"k","priority":"1"}`, "invalid priority: got string, want an integer"},
	} {
		status, hdr, body := call(t, s, "POST", tc.target, "", []byte(tc.body))
		if status != 400 {
			t.Errorf("POST %s %s: status %d, want 400: %s", tc.target, tc.body, status, body)
			continue
		}
		checkErrorBody(t, status, hdr, body)
		if !strings.Contains(string(body), tc.want) || strings.Contains(string(body), "Request.") {
			t.Errorf("POST %s %s: %s; want %q", tc.target, tc.body, body, tc.want)
		}
	}
}
