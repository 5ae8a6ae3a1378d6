package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
)

// /healthz answers 503 "unavailable" once the database does not answer, on
// both drivers, without naming the database or its error (it is open to
// anyone, tokens or not), and 200 while it does.
func TestHealthWithoutTheDatabase(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			leader := true
			s := newTestServerOn(t, kind, Config{AdminToken: "a", IsLeader: func() bool { return leader }})
			var h map[string]any
			code, _, body := call(t, s, "GET", "/healthz", "", nil)
			if err := json.Unmarshal(body, &h); code != http.StatusOK || err != nil || h["status"] != "ok" || h["database"] != "ok" || h["driver"] != kind || h["leader"] != true {
				t.Fatalf("GET /healthz: %d %s; want 200, ok, driver %s, leader", code, body, kind)
			}
			if err := s.drv.Close(); err != nil {
				t.Fatal(err)
			}
			leader = false
			code, _, body = call(t, s, "GET", "/healthz", "", nil)
			h = nil
			if err := json.Unmarshal(body, &h); code != http.StatusServiceUnavailable || err != nil || h["status"] != "unavailable" || h["database"] != "unreachable" || h["leader"] != false {
				t.Fatalf("GET /healthz, database closed: %d %s; want 503, unavailable, unreachable, not leader", code, body)
			}
			for _, leak := range []string{"closed", "postgres://", "sql:", "pool", "127.0.0.1"} {
				if strings.Contains(string(body), leak) {
					t.Errorf("GET /healthz, database closed: %s names %q: the open endpoint tells what only the log should", body, leak)
				}
			}
		})
	}
}
