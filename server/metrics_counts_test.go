package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// metricValue reads one sample, named with its labels as /metrics writes
// them, from the server's /metrics; -1 if it is not there.
func metricValue(tb testing.TB, s *Server, series string) float64 {
	tb.Helper()
	code, _, body := call(tb, s, "GET", "/metrics", "", nil)
	if code != http.StatusOK {
		tb.Fatalf("GET /metrics: %d %s", code, body)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		tb.Fatalf("%s: %v", series, err)
	}
	return v
}

// leaveAfterClaim is the real driver; once its claim has committed, the
// worker that sent it leaves (cancel ends the request's context).
type leaveAfterClaim struct {
	driver.Driver
	cancel context.CancelFunc
}

func (d *leaveAfterClaim) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	jobs, err := d.Driver.JobClaim(ctx, p)
	if len(jobs) > 0 {
		d.cancel()
	}
	return jobs, err
}

// A claim whose worker left after it committed is given back at once, and
// was never handed to anyone: drover_claims_total, the jobs claimed and
// handed to a worker, does not count it. It did, so a departed worker's
// claim, given back and claimed again, counted its job twice, and claims
// outran completions for good, as though the job were still being worked.
func TestClaimGivenBackIsNotCounted(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			d := &leaveAfterClaim{Driver: testdb.Open(t, kind), cancel: cancel}
			c, err := drover.NewClient(d, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := New(c, Config{})
			t.Cleanup(s.Close)
			if _, err := c.Enqueue(context.Background(), "k", nil, &drover.EnqueueOpts{Queue: "gb"}); err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequestWithContext(ctx, "POST", "/internal/task-claim", strings.NewReader(`{"worker_id":"w1","queues":["gb"]}`))
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"tasks":[]`) {
				t.Fatalf("claim of a worker that left: %d %s, want no tasks", rec.Code, rec.Body)
			}
			j, err := c.Get(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if j.Status != drover.StatusQueued {
				t.Fatalf("job %s, want queued: given back", j.Status)
			}
			if got := metricValue(t, s, `drover_claims_total{queue="gb"}`); got > 0 {
				t.Errorf(`drover_claims_total{queue="gb"} = %v after the only claim was given back unrun; want 0 (or no series)`, got)
			}
			// The worker that then claims it is counted, once.
			if code, _, body := call(t, s, "POST", "/internal/task-claim", "", []byte(`{"worker_id":"w2","queues":["gb"]}`)); code != http.StatusOK || !strings.Contains(string(body), `"task_id":1`) {
				t.Fatalf("second claim: %d %s", code, body)
			}
			if got := metricValue(t, s, `drover_claims_total{queue="gb"}`); got != 1 {
				t.Errorf(`drover_claims_total{queue="gb"} = %v after one claim handed to a worker; want 1`, got)
			}
		})
	}
}

// cutAfterReport is the real driver whose reports commit, after which the
// worker that sent them leaves (cancel ends the request's context), and
// which then answers the cancel if its context saw it, as pgx does when the
// cancel arrives while it awaits its COMMIT's reply: the report applied, the
// call says it was canceled.
type cutAfterReport struct {
	driver.Driver
	cancel context.CancelFunc
}

func (d *cutAfterReport) cut(ctx context.Context, j *driver.Job, err error) (*driver.Job, error) {
	d.cancel()
	if err == nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return j, err
}

func (d *cutAfterReport) JobComplete(ctx context.Context, p driver.CompleteParams) (*driver.Job, error) {
	j, err := d.Driver.JobComplete(context.WithoutCancel(ctx), p)
	return d.cut(ctx, j, err)
}

func (d *cutAfterReport) JobFail(ctx context.Context, p driver.FailParams) (*driver.Job, error) {
	j, err := d.Driver.JobFail(context.WithoutCancel(ctx), p)
	return d.cut(ctx, j, err)
}

func (d *cutAfterReport) JobSnooze(ctx context.Context, p driver.SnoozeParams) (*driver.Job, error) {
	j, err := d.Driver.JobSnooze(context.WithoutCancel(ctx), p)
	return d.cut(ctx, j, err)
}

// A report whose worker's connection broke after the database committed it,
// before the answer, is counted in drover_completions_total once: when it
// was applied. It was counted only when its answer was written, and its
// resend is a replay, counted nowhere (not to count it twice), so the
// outcome was counted in no replica's metrics at all.
func TestReportCutAfterItsCommitIsCountedOnce(t *testing.T) {
	for _, kind := range testdb.Kinds {
		for _, tc := range []struct{ outcome, report string }{
			{"succeeded", `"status":"succeeded","output":1`},
			{"failed", `"status":"failed","error":"bad"`},
			{"retried", `"status":"retry","error":"again"`},
			{"snoozed", `"status":"retry","error":"later","snooze_seconds":60`},
		} {
			t.Run(kind+"/"+tc.outcome, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				d := &cutAfterReport{Driver: testdb.Open(t, kind), cancel: cancel}
				c, err := drover.NewClient(d, nil)
				if err != nil {
					t.Fatal(err)
				}
				s := New(c, Config{})
				t.Cleanup(s.Close)
				if _, err := c.Enqueue(context.Background(), "k", nil, &drover.EnqueueOpts{Queue: "cut", MaxAttempts: 5}); err != nil {
					t.Fatal(err)
				}
				code, _, body := call(t, s, "POST", "/internal/task-claim", "", []byte(`{"worker_id":"w","queues":["cut"]}`))
				var ans claimAnswer
				if code != http.StatusOK || json.Unmarshal(body, &ans) != nil || len(ans.Tasks) != 1 {
					t.Fatalf("claim: %d %s", code, body)
				}
				tk := ans.Tasks[0]
				report := fmt.Sprintf(`{"task_id":%d,"attempt":%d,"lease_token":%q,"request_id":"R-cut",%s}`, tk.TaskID, tk.Attempt, tk.LeaseToken, tc.report)
				req := httptest.NewRequestWithContext(ctx, "POST", "/internal/task-complete", strings.NewReader(report))
				s.ServeHTTP(httptest.NewRecorder(), req) // its answer reaches no one
				// The worker resends its report, and is answered it as applied.
				code, hdr, body := call(t, s, "POST", "/internal/task-complete", "", []byte(report))
				if code != http.StatusOK || hdr.Get(replayedHeader) != "true" {
					t.Fatalf("resent report: %d %s=%q %s; want 200, a replay of the report the database applied", code, replayedHeader, hdr.Get(replayedHeader), body)
				}
				series := fmt.Sprintf(`drover_completions_total{outcome=%q,queue="cut"}`, tc.outcome)
				if got := metricValue(t, s, series); got != 1 {
					t.Errorf("%s = %v (-1: no series) after one report applied, its answer cut, then replayed; want 1", series, got)
				}
			})
		}
	}
}
