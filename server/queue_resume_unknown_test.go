package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
)

// Resuming a queue that was never paused (a typo: /queues/defualt/resume)
// answers that it is not paused and creates nothing, on both drivers. It
// wrote a pause record, so the queue that does not exist was listed by GET
// /queues (and served as 11 drover_jobs series) from then on, with no call to
// take it away (helper-77). A pause of a queue without jobs still makes one:
// a queue may be paused before its first job.
func TestResumeOfAnUnknownQueueCreatesNone(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			code, _, b := call(t, s, "POST", "/queues/defualt/resume", "", nil)
			if code != http.StatusOK || strings.TrimSpace(string(b)) != `{"name":"defualt","paused":false}` {
				t.Errorf("POST /queues/defualt/resume: %d %s; want 200 {\"name\":\"defualt\",\"paused\":false}", code, b)
			}
			_, _, b = call(t, s, "GET", "/queues", "", nil)
			if strings.Contains(string(b), `"defualt"`) {
				t.Errorf("GET /queues after resuming a queue that never existed nor was paused: %s; want it not listed", b)
			}
			_, _, m := call(t, s, "GET", "/metrics", "", nil)
			if strings.Contains(string(m), `queue="defualt"`) {
				t.Errorf("/metrics serves drover_jobs for the queue that never existed")
			}
		})
	}
}
