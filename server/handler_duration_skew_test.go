package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/drover-dev/drover/driver/sqlitedriver"
)

// drover_handler_duration_seconds was the server's clock minus started_at,
// which the database's clock wrote: a database whose clock runs ahead of the
// server's (PostgreSQL on another host) recorded negative durations into the
// histogram, which a Prometheus histogram's sum and quantiles take as they
// are. Here started_at is an hour in the server's future, as such a skew
// would write it; every outcome must record a duration of at least 0.
func TestHandlerDurationIsNeverNegative(t *testing.T) {
	s := newTestServer(t, Config{})
	db := s.drv.(*sqlitedriver.Driver).DB()
	reports := map[string]string{
		"succeeded": `"status":"succeeded","output":1`,
		"retried":   `"status":"retry","error":"boom"`,
		"snoozed":   `"status":"retry","error":"later","snooze_seconds":60`,
	}
	for outcome, report := range reports {
		if code, _, b := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k","queue":"`+outcome+`","max_attempts":5}`)); code != http.StatusCreated {
			t.Fatalf("enqueue: %d %s", code, b)
		}
		code, _, b := call(t, s, "POST", "/internal/task-claim", "", []byte(`{"worker_id":"w","queues":["`+outcome+`"]}`))
		var claim claimAnswer
		if err := json.Unmarshal(b, &claim); code != http.StatusOK || err != nil || len(claim.Tasks) != 1 {
			t.Fatalf("task-claim: %d %s (%v), want one task", code, b, err)
		}
		task := claim.Tasks[0]
		if _, err := db.ExecContext(context.Background(),
			`UPDATE drover_jobs SET started_at = started_at + 3600000000 WHERE id = ?`, task.TaskID); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"task_id":%d,"attempt":%d,"lease_token":%q,%s}`, task.TaskID, task.Attempt, task.LeaseToken, report)
		if code, _, b := call(t, s, "POST", "/internal/task-complete", "", []byte(body)); code != http.StatusOK {
			t.Fatalf("task-complete (%s): %d %s", outcome, code, b)
		}
	}
	families, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "drover_handler_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			var outcome string
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					outcome = l.GetValue()
				}
			}
			seen[outcome] = true
			if sum := m.GetHistogram().GetSampleSum(); sum < 0 {
				t.Errorf("drover_handler_duration_seconds{outcome=%q} sum = %v, want at least 0", outcome, sum)
			}
		}
	}
	for outcome := range reports {
		if !seen[outcome] {
			t.Errorf("drover_handler_duration_seconds has no %s series", outcome)
		}
	}
}
