package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// Every time the API answers is written in UTC ("Z"), whatever the time zone
// of the database session: a job's error history (errors[].at) was written by
// PostgreSQL as JSON text in the session's TimeZone (initdb sets it from the
// host's zone), and answered as given, "2026-12-06T23:55:53.470796-05:00",
// where every other time of the same job, and the same instant in the events
// list, read "…04:55:53.470796Z", and SQLite answered "Z" throughout. The
// library's Job.Errors[].At was in that zone too.
func TestTimesAreAnsweredInUTCWhateverTheSessionZone(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			url := testdb.URL(t, kind)
			if kind == "postgres" {
				url += "&timezone=America/New_York"
			}
			c, err := drover.NewClient(testdb.OpenURL(t, kind, url), nil)
			if err != nil {
				t.Fatal(err)
			}
			s := New(c, Config{})
			t.Cleanup(s.Close)
			task := enqueueAndClaim(t, s)
			if code, _, b := call(t, s, "POST", "/internal/task-complete", "", []byte(fmt.Sprintf(
				`{"task_id":%d,"attempt":%d,"lease_token":%q,"status":"retry","error":"boom","retry_after_seconds":3600}`,
				task.TaskID, task.Attempt, task.LeaseToken))); code != http.StatusOK {
				t.Fatalf("retry report: %d %s", code, b)
			}
			_, _, body := call(t, s, "GET", fmt.Sprintf("/jobs/%d", task.TaskID), "", nil)
			var job struct {
				RunAt     string `json:"run_at"`
				CreatedAt string `json:"created_at"`
				Errors    []struct {
					At string `json:"at"`
				} `json:"errors"`
			}
			if err := json.Unmarshal(body, &job); err != nil || len(job.Errors) != 1 {
				t.Fatalf("GET /jobs/%d: %v %s; want one error", task.TaskID, err, body)
			}
			for name, v := range map[string]string{"run_at": job.RunAt, "created_at": job.CreatedAt, "errors[0].at": job.Errors[0].At} {
				if !strings.HasSuffix(v, "Z") {
					t.Errorf("GET /jobs/%d: %s = %q, want it in UTC (…Z) as every time the API answers", task.TaskID, name, v)
				}
			}
			j, err := c.Get(context.Background(), task.TaskID)
			if err != nil || len(j.Errors) != 1 || j.Errors[0].At.Location() != time.UTC {
				t.Errorf("Client.Get(%d): %v, errors %+v; want one error whose At is in UTC", task.TaskID, err, j.Errors)
			}
		})
	}
}
