package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
)

// A path with an empty segment where a job id or a queue name goes (a
// client whose variable was empty: /jobs//cancel, /queues//pause) is a 404
// that says so, and offers no clean form: it offered /jobs/cancel, which is
// job "cancel" (405 for a POST), and /queues/pause, no endpoint (helper-80).
func TestEmptySegmentIsNamedNotCleaned(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			for _, target := range []string{"/jobs//cancel", "/queues//pause", "/jobs//events"} {
				code, _, b := call(t, s, "POST", target, "", nil)
				if code != http.StatusNotFound || !strings.Contains(string(b), "a segment of the path is empty") || strings.Contains(string(b), "did you mean") {
					t.Errorf("POST %s: %d %s; want 404 saying a segment is empty, with no clean form offered", target, code, b)
				}
			}
		})
	}
}
