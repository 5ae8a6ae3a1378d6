package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A request no route takes (an unknown path, a method a path does not
// take) was answered by the mux's catch-alls outside wrap: the Host guard
// of a server on loopback without tokens (DNS rebinding) let it through,
// and drover_http_requests_total never counted it. A path not in clean
// form (//jobs/1/cancel, from a base URL with a trailing slash; /./, /../)
// was answered by the mux itself: a 307 to the clean path, in HTML, outside
// wrap too. `curl -f -X POST` treats a 307 as success and does not follow
// it: the operator's cancel exited 0 and canceled nothing.
func TestUnmatchedRequestsGoThroughTheGuards(t *testing.T) {
	s := newTestServer(t, Config{LoopbackHostsOnly: true})
	send := func(method, target, host, body string) (int, http.Header, []byte) {
		t.Helper()
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.Host = host
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, rec.Header(), b
	}
	for _, tc := range []struct{ method, target string }{
		{"GET", "/nope"}, {"PUT", "/jobs"}, {"POST", "//jobs"}, {"GET", "/jobs/../dlq"},
	} {
		code, hdr, body := send(tc.method, tc.target, "rebound.example:7420", "")
		if code != http.StatusForbidden {
			t.Errorf("%s %s with Host rebound.example: %d %s, want 403 (the loopback Host guard)", tc.method, tc.target, code, body)
			continue
		}
		checkErrorBody(t, code, hdr, body)
	}

	if code, _, b := send("POST", "/jobs", "127.0.0.1:7420", `{"kind":"k","run_at":"2030-01-01T09:00:00Z"}`); code != http.StatusCreated {
		t.Fatalf("enqueue: %d %s", code, b)
	}
	for _, tc := range []struct{ method, target, clean string }{
		{"POST", "//jobs/1/cancel", "/jobs/1/cancel"},
		{"POST", "/jobs/./1/cancel", "/jobs/1/cancel"},
		{"GET", "/jobs/2/../1", "/jobs/1"},
		{"GET", "//jobs", "/jobs"},
	} {
		code, hdr, body := send(tc.method, tc.target, "127.0.0.1:7420", "")
		var e errorBody
		if code != http.StatusNotFound || json.Unmarshal(body, &e) != nil || e.Error.Code != CodeNotFound ||
			!strings.Contains(e.Error.Message, tc.target) || !strings.Contains(e.Error.Message, tc.clean) {
			t.Errorf("%s %s: %d %q (Location %q), want 404 not_found naming the path and its clean form %s",
				tc.method, tc.target, code, body, hdr.Get("Location"), tc.clean)
			continue
		}
		checkErrorBody(t, code, hdr, body)
	}
	if _, _, b := send("GET", "/jobs/1", "127.0.0.1:7420", ""); !bytes.Contains(b, []byte(`"status":"queued"`)) {
		t.Errorf("job 1 after the unclean cancels: %s, want it still queued", b)
	}

	_, _, metrics := send("GET", "/metrics", "127.0.0.1:7420", "")
	for _, want := range []string{
		`drover_http_requests_total{code="403",route="unmatched"} 3`,
		`drover_http_requests_total{code="403",route="/jobs"} 1`,
		`drover_http_requests_total{code="404",route="unmatched"} 4`,
	} {
		if !bytes.Contains(metrics, []byte(want+"\n")) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
