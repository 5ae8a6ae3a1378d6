package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Every endpoint, and HEAD beside each GET, asks for the token its scope
// names: none for /healthz and /openapi.json, the worker's or the admin's
// for /internal/*, the admin's for everything else. A path that only
// resembles an endpoint (a trailing slash, an escaped slash, a dot segment,
// another case) reaches no handler with a token too weak for it: it is
// refused, or redirected to the clean path, whose handler asks again.
func TestEveryRouteAsksForItsScope(t *testing.T) {
	s := newTestServer(t, Config{AdminToken: "admin-t", WorkerToken: "worker-t"})
	send := func(method, target, token string) (int, http.Header, string) {
		t.Helper()
		req := httptest.NewRequest(method, target, strings.NewReader("{}"))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec.Code, rec.Header(), rec.Body.String()
	}
	concrete := strings.NewReplacer("{id}", "1", "{name}", "default")
	open := map[string]bool{"/healthz": true, "/openapi.json": true}
	for _, rt := range s.Routes() {
		path := concrete.Replace(rt.Path)
		internal := strings.HasPrefix(rt.Path, "/internal/")
		want := scopeAdmin
		switch {
		case open[rt.Path]:
			want = scopeOpen
		case internal:
			want = scopeWorker
		}
		if rt.Scope != want {
			t.Errorf("%s %s has scope %d, want %d", rt.Method, rt.Path, rt.Scope, want)
		}
		methods := []string{rt.Method}
		if rt.Method == "GET" {
			methods = append(methods, "HEAD")
		}
		for _, m := range methods {
			for _, tc := range []struct {
				token string
				deny  int // 0: let through to the handler
			}{
				{"", http.StatusUnauthorized},
				{"wrong-t", http.StatusUnauthorized},
				{"admin-t", 0},
				{"worker-t", http.StatusForbidden},
			} {
				deny := tc.deny
				if want == scopeOpen || (want == scopeWorker && tc.token == "worker-t") {
					deny = 0
				}
				code, _, body := send(m, path, tc.token)
				refused := code == http.StatusUnauthorized || code == http.StatusForbidden
				if deny != 0 && code != deny {
					t.Errorf("%s %s with token %q: %d %.120s; want %d", m, path, tc.token, code, body, deny)
				}
				if deny == 0 && refused {
					t.Errorf("%s %s with token %q: %d %.120s; want it let through", m, path, tc.token, code, body)
				}
			}
		}
	}
	for _, target := range []string{
		"/jobs/", "/jobs/1/", "/dlq/", "/metrics/", "/JOBS", "/Metrics",
		"/internal/task-claim/", "/internal%2Fjobs", "/internal/%2e%2e/jobs", "/internal%2F..%2Fjobs",
		"/internal/..%2Fjobs", "/internal/../jobs", "//jobs", "/internal/./../metrics", "/internal//../dlq",
	} {
		for _, m := range []string{"GET", "HEAD", "POST", "DELETE", "OPTIONS"} {
			code, hdr, body := send(m, target, "worker-t")
			switch {
			case code == http.StatusNotFound, code == http.StatusMethodNotAllowed, code == http.StatusForbidden:
			case code == http.StatusTemporaryRedirect || code == http.StatusMovedPermanently || code == http.StatusPermanentRedirect:
				// The redirect's target is served (or refused) on its own.
				loc := hdr.Get("Location")
				if c, _, b := send(m, loc, "worker-t"); c != http.StatusForbidden && c != http.StatusNotFound && c != http.StatusMethodNotAllowed {
					t.Errorf("%s %s with the worker token: redirected to %s, which answered %d %.120s; want 403", m, target, loc, c, b)
				}
			default:
				t.Errorf("%s %s with the worker token: %d %.120s; want 403, 404, 405 or a redirect", m, target, code, body)
			}
		}
	}
}
