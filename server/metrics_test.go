package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

// A fresh server's /metrics already has the families a dashboard names, at 0:
// the default queue's job counts of every status, claims and completions; and
// a queue's count of a status it holds none of is 0, not absent.
func TestMetricsOfAFreshServer(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			scrape := func() string {
				t.Helper()
				code, _, body := call(t, s, "GET", "/metrics", "", nil)
				if code != http.StatusOK {
					t.Fatalf("GET /metrics: %d", code)
				}
				return string(body)
			}
			text := scrape()
			want := []string{
				`drover_claims_total{queue="default"} 0`,
				`drover_lease_lost_total 0`,
			}
			for _, o := range []string{"succeeded", "retried", "failed", "snoozed"} {
				want = append(want, `drover_completions_total{outcome="`+o+`",queue="default"} 0`)
			}
			for _, st := range lifecycle.Statuses {
				want = append(want, `drover_jobs{queue="default",status="`+string(st)+`"} 0`)
			}
			for _, w := range want {
				if !strings.Contains(text, w+"\n") {
					t.Errorf("a fresh server's /metrics lacks %s", w)
				}
			}
			if code, _, b := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k","queue":"mq"}`)); code != http.StatusCreated {
				t.Fatalf("enqueue: %d %s", code, b)
			}
			text = scrape()
			for _, w := range []string{`drover_jobs{queue="mq",status="queued"} 1`, `drover_jobs{queue="mq",status="running"} 0`, `drover_jobs{queue="default",status="queued"} 0`} {
				if !strings.Contains(text, w+"\n") {
					t.Errorf("after an enqueue to mq, /metrics lacks %s", w)
				}
			}
		})
	}
}

// A task-claim long poll waits up to MaxWait (60 s by default): its latency
// lands in a bucket of its own, not in +Inf with every other wait past 10 s.
func TestRequestLatencyBucketsCoverALongPoll(t *testing.T) {
	m := newMetrics(testdb.Open(t, "sqlite"))
	m.latency.WithLabelValues("POST /internal/task-claim").Observe(45)
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "drover_http_request_duration_seconds" {
			continue
		}
		for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
			if b.GetUpperBound() == 60 && b.GetCumulativeCount() == 1 {
				return
			}
		}
		t.Fatalf("a 45 s long poll is in no bucket up to 60 s: %v", mf.GetMetric()[0].GetHistogram().GetBucket())
	}
	t.Fatal("no drover_http_request_duration_seconds family")
}
