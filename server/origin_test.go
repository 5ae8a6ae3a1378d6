package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A state-changing request a browser sends from another site (a page the
// developer opened, posting to a `drover dev` on localhost without tokens) is
// refused with 403 and changes nothing; clients that are not browsers, and
// pages of the server's own origin, pass, and reads are not affected.
func TestCrossSiteBrowserRequestsAreRefused(t *testing.T) {
	s := newTestServer(t, Config{})
	send := func(method, target string, hdr map[string]string, body string) (int, []byte) {
		t.Helper()
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.Host = "127.0.0.1:7420"
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec.Code, rec.Body.Bytes()
	}
	enqueue := `{"kind":"echo"}`
	refused := []struct {
		name   string
		method string
		target string
		hdr    map[string]string
		body   string
	}{
		{"enqueue, Sec-Fetch-Site cross-site", "POST", "/jobs", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}, enqueue},
		{"enqueue, Sec-Fetch-Site same-site", "POST", "/jobs", map[string]string{"Sec-Fetch-Site": "same-site"}, enqueue},
		{"enqueue, a foreign Origin only", "POST", "/jobs", map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}, enqueue},
		{"pause a queue, form post", "POST", "/queues/default/pause", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"}, ""},
		{"claim a task", "POST", "/internal/task-claim", map[string]string{"Origin": "http://localhost:8080"}, `{"worker_id":"w","queues":["default"]}`},
		{"purge the DLQ", "DELETE", "/dlq", map[string]string{"Sec-Fetch-Site": "cross-site"}, ""},
	}
	for _, tc := range refused {
		code, body := send(tc.method, tc.target, tc.hdr, tc.body)
		if code != http.StatusForbidden || !strings.Contains(string(body), `"forbidden"`) || !strings.Contains(string(body), "cross-origin") {
			t.Errorf("%s: %d %s, want 403 forbidden naming the cross-origin request", tc.name, code, body)
		}
	}
	var page struct{ Jobs []json.RawMessage }
	code, body := send("GET", "/jobs", map[string]string{"Sec-Fetch-Site": "cross-site"}, "")
	if err := json.Unmarshal(body, &page); code != http.StatusOK || err != nil || len(page.Jobs) != 0 {
		t.Fatalf("GET /jobs from another site: %d %s, want 200 and no jobs (reads pass; no refused enqueue wrote one)", code, body)
	}
	if code, body := send("GET", "/queues", nil, ""); code != http.StatusOK || strings.Contains(string(body), `"paused":true`) {
		t.Errorf("GET /queues: %d %s, want no paused queue", code, body)
	}
	for name, hdr := range map[string]map[string]string{
		"no browser headers (curl, a Go client)":  nil,
		"Sec-Fetch-Site same-origin":              {"Sec-Fetch-Site": "same-origin"},
		"Sec-Fetch-Site none (typed by the user)": {"Sec-Fetch-Site": "none"},
		"an Origin that is the server's own":      {"Origin": "http://127.0.0.1:7420"},
	} {
		if code, body := send("POST", "/jobs", hdr, enqueue); code != http.StatusCreated {
			t.Errorf("enqueue, %s: %d %s, want 201", name, code, body)
		}
	}
}

// The auth scheme is matched case-insensitively (RFC 9110 §11.1).
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	s := newTestServer(t, Config{AdminToken: "admin-secret"})
	for _, auth := range []string{"Bearer admin-secret", "bearer admin-secret", "BEARER admin-secret"} {
		req := httptest.NewRequest("GET", "/jobs", nil)
		req.Header.Set("Authorization", auth)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("Authorization %q: %d %s, want 200", auth, rec.Code, rec.Body)
		}
	}
	for _, auth := range []string{"Basic admin-secret", "Bearer", "Bearer wrong", "admin-secret"} {
		req := httptest.NewRequest("GET", "/jobs", nil)
		req.Header.Set("Authorization", auth)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d, want 401", auth, rec.Code)
		}
	}
}

func TestIsLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:7420": true, "127.0.0.1": true, "127.1.2.3:80": true, "localhost:7420": true, "LOCALHOST": true,
		"app.localhost:3000": true, "[::1]:7420": true, "::1": true,
		":7420": false, "0.0.0.0:7420": false, "10.0.0.5:7420": false, "rebind.attacker.example:7420": false,
		"localhost.attacker.example": false, "127.0.0.1.nip.io:7420": false, "": false,
	} {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// With LoopbackHostsOnly, a request naming any other host is refused, reads too.
func TestLoopbackHostsOnly(t *testing.T) {
	s := newTestServer(t, Config{LoopbackHostsOnly: true})
	for host, want := range map[string]int{
		"127.0.0.1:7420": http.StatusOK, "localhost:7420": http.StatusOK, "[::1]:7420": http.StatusOK,
		"rebind.attacker.example:7420": http.StatusForbidden, "192.168.1.9:7420": http.StatusForbidden,
	} {
		req := httptest.NewRequest("GET", "/jobs", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("GET /jobs, Host %s: %d %s, want %d", host, rec.Code, rec.Body, want)
		}
	}
	// Every route refuses it, the open ones too, and says so in openapi.json.
	documented := documentedStatuses(t)
	for _, r := range s.Routes() {
		req := httptest.NewRequest(r.Method, strings.NewReplacer("{id}", "1", "{name}", "default").Replace(r.Path), nil)
		req.Host = "rebind.attacker.example"
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s %s, Host rebind.attacker.example: %d %s, want 403", r.Method, r.Path, rec.Code, rec.Body)
		}
		if !documented[fuzzTarget{r.Method, r.Path}][http.StatusForbidden] {
			t.Errorf("%s %s answers 403 to a Host that is not loopback; openapi.json does not list it", r.Method, r.Path)
		}
	}
}
