package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
)

// A timeout is answered as the number of seconds it was given as, in every
// answer that shows it: 1.118 came back as 1.1179999999999999 and 1.14 as
// 1.1400000000000001 (Go's Duration.Seconds adds the fraction in binary),
// in POST /jobs, GET /jobs/{id}, a task's claim and `jobs show -o json`.
func TestTimeoutSecondsAnsweredAsGiven(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			for i, given := range []string{"1.118", "1.14", "0.3", "86399.999"} {
				want := `"timeout_seconds":` + given + `,`
				code, _, b := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k","timeout_seconds":`+given+`}`))
				if code != http.StatusCreated || !strings.Contains(string(b), want) {
					t.Errorf("POST /jobs with timeout_seconds %s: %d %s; want it answered as given", given, code, b)
				}
				if _, _, b := call(t, s, "GET", fmt.Sprintf("/jobs/%d", i+1), "", nil); !strings.Contains(string(b), want) {
					t.Errorf("GET /jobs/%d (timeout_seconds %s given): %s; want it answered as given", i+1, given, b)
				}
				_, _, b = call(t, s, "POST", "/internal/task-claim", "", []byte(`{"worker_id":"w","queues":["default"]}`))
				if !strings.Contains(string(b), want) {
					t.Errorf("claim of the job with timeout_seconds %s: %s; want it answered as given", given, b)
				}
			}
		})
	}
}
