package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// newTestServer returns a Server over a fresh SQLite database private to tb.
func newTestServer(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	return newTestServerOn(tb, "sqlite", cfg)
}

// newTestServerOn returns a Server over a fresh database of kind private to tb.
func newTestServerOn(tb testing.TB, kind string, cfg Config) *Server {
	tb.Helper()
	drv := testdb.Open(tb, kind)
	c, err := drover.NewClient(drv, nil)
	if err != nil {
		tb.Fatalf("NewClient: %v", err)
	}
	s := New(c, cfg)
	tb.Cleanup(s.Close)
	return s
}

// call serves one request in process and returns the status and body.
func call(tb testing.TB, h http.Handler, method, target, token string, body []byte) (int, http.Header, []byte) {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

// checkErrorBody fails unless b is exactly {"error": {"code", "message"}} with
// both set.
func checkErrorBody(tb testing.TB, status int, hdr http.Header, b []byte) {
	tb.Helper()
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		tb.Errorf("status %d: Content-Type = %q, want application/json", status, ct)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var e errorBody
	if err := dec.Decode(&e); err != nil {
		tb.Fatalf("status %d: body is not the error shape: %v\n%s", status, err, b)
	}
	if e.Error.Code == "" || e.Error.Message == "" {
		tb.Fatalf("status %d: error code or message empty: %s", status, b)
	}
}

func TestErrorsAreJSON(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, Config{AdminToken: "admin", WorkerToken: "worker"})
	tests := []struct {
		method, target, token, body string
		want                        int
		code                        string
	}{
		{"GET", "/nope", "admin", "", 404, CodeNotFound},
		{"PUT", "/jobs", "admin", "", 405, CodeMethodNotAllowed},
		{"GET", "/jobs", "", "", 401, CodeUnauthorized},
		{"GET", "/jobs", "wrong", "", 401, CodeUnauthorized},
		{"GET", "/jobs", "worker", "", 403, CodeForbidden},
		{"POST", "/jobs", "admin", `{}`, 400, CodeInvalidArgument},
		{"POST", "/jobs", "admin", `{"kind":"k","bogus":1}`, 400, CodeInvalidArgument},
		{"GET", "/jobs/abc", "admin", "", 400, CodeInvalidArgument},
		{"GET", "/jobs/99", "admin", "", 404, CodeNotFound},
		{"POST", "/internal/heartbeat", "worker", `{"task_id":1,"attempt":1,"lease_token":"x"}`, 404, CodeNotFound},
		{"POST", "/jobs", "admin", `{"kind":"k","args":{"a":"` + strings.Repeat("x", 3<<20) + `"}}`, 413, CodePayloadTooLarge},
	}
	for _, tt := range tests {
		status, hdr, body := call(t, s, tt.method, tt.target, tt.token, []byte(tt.body))
		if status != tt.want {
			t.Errorf("%s %s: status %d, want %d: %s", tt.method, tt.target, status, tt.want, body)
			continue
		}
		checkErrorBody(t, status, hdr, body)
		var e errorBody
		_ = json.Unmarshal(body, &e)
		if e.Error.Code != tt.code {
			t.Errorf("%s %s: code %q, want %q", tt.method, tt.target, e.Error.Code, tt.code)
		}
	}
	if status, _, _ := call(t, s, "GET", "/healthz", "", nil); status != 200 {
		t.Errorf("GET /healthz without a token: %d, want 200 (always open)", status)
	}
}

// An unknown path is named as it was sent: a queue name of an escaped slash
// (%2F) matches no route, and its unescaped form, /queues///pause, hid why.
func TestNoEndpointNamesThePathAsSent(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, Config{})
	for target, want := range map[string]string{
		"/nope":             "no endpoint /nope",
		"/queues/%2F/pause": "no endpoint /queues/%2F/pause",
		"/jobs/%2F/cancel":  "no endpoint /jobs/%2F/cancel",
	} {
		status, _, body := call(t, s, "POST", target, "", nil)
		var e errorBody
		if err := json.Unmarshal(body, &e); err != nil || status != http.StatusNotFound || e.Error.Message != want {
			t.Errorf("POST %s: %d %s, want 404 %q", target, status, body, want)
		}
	}
}

// With the database gone, /metrics still serves what the process counts itself
// (the job counts it cannot read are left out) instead of failing the whole
// scrape with a 500 whose text named the database.
func TestMetricsWithoutTheDatabase(t *testing.T) {
	s := newTestServer(t, Config{})
	if code, _, _ := call(t, s, "GET", "/metrics", "", nil); code != http.StatusOK {
		t.Fatalf("GET /metrics: %d, want 200", code)
	}
	if err := s.drv.Close(); err != nil {
		t.Fatal(err)
	}
	code, _, body := call(t, s, "GET", "/metrics", "", nil)
	if code != http.StatusOK || !strings.Contains(string(body), "drover_http_requests_total") {
		t.Errorf("GET /metrics with the database closed: %d, want 200 with the in-process counters:\n%.500s", code, body)
	}
}

// A long poll cut short (the server shutting down ends it through the request's
// context) answers an empty task list in the answer's shape; it answered 200
// with no body, which a worker in another language fails to parse.
func TestClaimCutShortAnswersNoTasks(t *testing.T) {
	s := newTestServer(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequestWithContext(ctx, "POST", "/internal/task-claim",
		strings.NewReader(`{"worker_id":"w","queues":["default"],"wait_seconds":5}`))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	const want = `{"tasks":[],"claimed_after_seconds":0,"replayed":false}`
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != want {
		t.Errorf("claim with its context ended: %d %q, want 200 %s", rec.Code, rec.Body.String(), want)
	}
}

// A claim repeated with its request_id answers the tasks its first sending
// took, before this request arrived: claimed_after_seconds is 0, not the time
// since this one arrived, which would let a worker count the lease from later
// than it began (helper-36's F4). The first answer's value covers its wait.
func TestReplayedClaimClaimedAfterIsZero(t *testing.T) {
	s := newTestServer(t, Config{})
	runAt := time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	if code, _, body := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k","run_at":"`+runAt+`"}`)); code != http.StatusCreated {
		t.Fatalf("POST /jobs: %d %s", code, body)
	}
	claim := []byte(`{"worker_id":"w","queues":["default"],"wait_seconds":5,"request_id":"r1"}`)
	type answer struct {
		Tasks []struct {
			TaskID       int64   `json:"task_id"`
			LeaseSeconds float64 `json:"lease_seconds"`
		} `json:"tasks"`
		ClaimedAfterSeconds float64 `json:"claimed_after_seconds"`
	}
	var first, again answer
	for _, a := range []*answer{&first, &again} {
		code, _, body := call(t, s, "POST", "/internal/task-claim", "", claim)
		if code != http.StatusOK {
			t.Fatalf("task-claim: %d %s", code, body)
		}
		if err := json.Unmarshal(body, a); err != nil || len(a.Tasks) != 1 {
			t.Fatalf("task-claim answer %s: %v, want one task", body, err)
		}
	}
	if first.ClaimedAfterSeconds < 0.2 || first.Tasks[0].LeaseSeconds != 30 {
		t.Errorf("first answer: claimed_after_seconds %v, lease_seconds %v; want at least the job's 0.3s wait, and 30", first.ClaimedAfterSeconds, first.Tasks[0].LeaseSeconds)
	}
	if again.Tasks[0].TaskID != first.Tasks[0].TaskID || again.ClaimedAfterSeconds != 0 {
		t.Errorf("repeated claim: task %d, claimed_after_seconds %v; want task %d and 0", again.Tasks[0].TaskID, again.ClaimedAfterSeconds, first.Tasks[0].TaskID)
	}
}
