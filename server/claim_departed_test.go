package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// heldClaims holds the first JobClaim until release is closed, after closing
// entered: the first sending of a claim is still at the database when its
// worker's connection breaks.
type heldClaims struct {
	driver.Driver
	once             sync.Once
	entered, release chan struct{}
}

func (h *heldClaims) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	first := false
	h.once.Do(func() { first = true })
	if first {
		close(h.entered)
		<-h.release
	}
	return h.Driver.JobClaim(ctx, p)
}

// A claim whose worker left while it ran rolls back before it commits: the
// job stays queued, no attempt or execution used, with or without a
// request_id (a remote worker's Stop, a server's shutdown). A resend of its
// request_id that came meanwhile keeps what it was answered: giving the first
// sending's tasks back after its commit put the job in the queue while the
// worker ran it, and another worker claimed it (helper-38's F1); not giving
// them back, when no resend came, left the job leased to nobody until the
// reaper spent its execution (helper-40's R40-1).
func TestClaimOfADepartedWorker(t *testing.T) {
	for _, kind := range testdb.Kinds {
		for _, tc := range []struct {
			requestID string
			resend    bool
		}{{"", false}, {"R1", false}, {"R1", true}} {
			requestID := tc.requestID
			t.Run(fmt.Sprintf("%s/request_id=%q/resend=%v", kind, requestID, tc.resend), func(t *testing.T) {
				h := &heldClaims{Driver: testdb.Open(t, kind), entered: make(chan struct{}), release: make(chan struct{})}
				c, err := drover.NewClient(h, nil)
				if err != nil {
					t.Fatal(err)
				}
				s := New(c, Config{})
				t.Cleanup(s.Close)
				if code, _, body := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k"}`)); code != http.StatusCreated {
					t.Fatalf("POST /jobs: %d %s", code, body)
				}
				claim := fmt.Sprintf(`{"worker_id":"w1","queues":["default"],"request_id":%q}`, requestID)

				ctx, cancel := context.WithCancel(context.Background())
				first := make(chan struct{})
				go func() {
					defer close(first)
					req := httptest.NewRequestWithContext(ctx, "POST", "/internal/task-claim", strings.NewReader(claim))
					s.ServeHTTP(httptest.NewRecorder(), req)
				}()
				<-h.entered
				cancel() // the worker's connection broke: no answer reaches it

				var ans struct {
					Tasks []struct {
						TaskID     int64  `json:"task_id"`
						Attempt    int    `json:"attempt"`
						LeaseToken string `json:"lease_token"`
					} `json:"tasks"`
				}
				if tc.resend {
					// The worker resends the claim and is answered the task.
					code, _, body := call(t, s, "POST", "/internal/task-claim", "", []byte(claim))
					if code != http.StatusOK || json.Unmarshal(body, &ans) != nil || len(ans.Tasks) != 1 {
						t.Fatalf("resend: %d %s, want one task", code, body)
					}
				}
				close(h.release)
				<-first

				job, err := c.Get(context.Background(), 1)
				if err != nil {
					t.Fatal(err)
				}
				if !tc.resend {
					if job.Status != drover.StatusQueued || job.Executions != 0 || job.Attempt != 0 {
						t.Errorf("claim of a worker gone: job %s, attempt %d, executions %d; want it rolled back: queued, 0, 0", job.Status, job.Attempt, job.Executions)
					}
					return
				}
				tk := ans.Tasks[0]
				if job.Status != drover.StatusRunning || job.Attempt != tk.Attempt {
					t.Errorf("after the resend answered attempt %d: job %s at attempt %d; want running, held by w1", tk.Attempt, job.Status, job.Attempt)
				}
				hb := fmt.Sprintf(`{"task_id":%d,"attempt":%d,"lease_token":%q}`, tk.TaskID, tk.Attempt, tk.LeaseToken)
				if code, _, body := call(t, s, "POST", "/internal/heartbeat", "", []byte(hb)); code != http.StatusOK {
					t.Errorf("heartbeat under the lease the resend answered: %d %s; want 200", code, body)
				}
			})
		}
	}
}

// shutdownAtCommit is the real driver whose first claim that takes jobs has
// the server's shutdown end its request right after it commits.
type shutdownAtCommit struct {
	driver.Driver
	once     sync.Once
	shutdown context.CancelCauseFunc
}

func (s *shutdownAtCommit) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	jobs, err := s.Driver.JobClaim(ctx, p)
	if err == nil && len(jobs) > 0 {
		s.once.Do(func() { s.shutdown(errServerShutdown) })
	}
	return jobs, err
}

// A claim that commits as the server shuts down is answered to its worker,
// which is still there (the shutdown ends the request's context to end long
// polls, with its own cause). It was answered no tasks, and with a
// request_id its job stayed leased to the worker until the reaper spent its
// execution (helper-41 #4).
func TestClaimCommittedAtShutdownIsAnswered(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, shutdown := context.WithCancelCause(context.Background())
			defer shutdown(nil)
			d := &shutdownAtCommit{Driver: testdb.Open(t, kind), shutdown: shutdown}
			c, err := drover.NewClient(d, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := New(c, Config{})
			t.Cleanup(s.Close)
			if code, _, body := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k"}`)); code != http.StatusCreated {
				t.Fatalf("POST /jobs: %d %s", code, body)
			}
			req := httptest.NewRequestWithContext(ctx, "POST", "/internal/task-claim",
				strings.NewReader(`{"worker_id":"w1","queues":["default"],"request_id":"R-shutdown","wait_seconds":5}`))
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"task_id":1`) {
				t.Errorf("claim that committed at the shutdown: %d %s; want its task answered", rec.Code, rec.Body.String())
			}
		})
	}
}
