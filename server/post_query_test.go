package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// A state-changing operator call takes its input in the body; a query
// parameter sent to one (POST /jobs?queue=payments, the queue meant for the
// job) is refused rather than ignored, which enqueued the job into the
// default queue, where other workers would take it.
func TestOperatorCallsRefuseQueryParameters(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, Config{})
	for _, tc := range []struct{ method, target, body, field string }{
		{"POST", "/jobs?queue=payments", `{"kind":"charge"}`, "queue"},
		{"POST", "/jobs?run_at=2030-01-01T00:00:00Z", `{"kind":"charge"}`, "run_at"},
		{"POST", "/jobs?%zz", `{"kind":"charge"}`, "query"},
		{"POST", "/jobs/1/cancel?request_id=r1", ``, "request_id"},
		{"POST", "/dlq/1/requeue?queue=q", ``, "queue"},
		{"POST", "/queues/default/pause?queue=payments", ``, "queue"},
		{"POST", "/queues/default/resume?x=1", ``, "x"},
	} {
		status, hdr, body := call(t, s, tc.method, tc.target, "", []byte(tc.body))
		if status != 400 {
			t.Errorf("%s %s: status %d, want 400: %s", tc.method, tc.target, status, body)
			continue
		}
		checkErrorBody(t, status, hdr, body)
		if !strings.Contains(string(body), "invalid "+tc.field) {
			t.Errorf("%s %s: %s; want the error to name %s", tc.method, tc.target, body, tc.field)
		}
	}
	status, _, body := call(t, s, "GET", "/jobs", "", nil)
	var page struct{ Jobs []json.RawMessage }
	if err := json.Unmarshal(body, &page); status != 200 || err != nil || len(page.Jobs) != 0 {
		t.Errorf("GET /jobs after the refused calls: %d, %s (%v); want no job written", status, body, err)
	}
	status, _, body = call(t, s, "GET", "/queues", "", nil)
	if status != 200 || strings.Contains(string(body), `"paused":true`) {
		t.Errorf("GET /queues after the refused calls: %d, %s; want no queue paused", status, body)
	}
	// Without a query string they work as before.
	if status, _, body := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"charge","queue":"payments"}`)); status != 201 {
		t.Errorf("POST /jobs: %d, want 201: %s", status, body)
	}
}
