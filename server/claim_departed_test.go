package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// heldClaims holds the first JobClaim (of those only picks, if set) until
// release is closed, after closing entered: the first sending of a claim is
// still at the database when its worker's connection breaks.
type heldClaims struct {
	driver.Driver
	only             func(driver.ClaimParams) bool
	once             sync.Once
	entered, release chan struct{}
}

func (h *heldClaims) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	if h.only != nil && !h.only(p) {
		return h.Driver.JobClaim(ctx, p)
	}
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
				claim := `{"worker_id":"w1","queues":["default"]}`
				if requestID != "" {
					claim = fmt.Sprintf(`{"worker_id":"w1","queues":["default"],"request_id":%q}`, requestID)
				}

				ctx, cancel := context.WithCancel(context.Background())
				first := make(chan struct{})
				go func() {
					defer close(first)
					req := httptest.NewRequestWithContext(ctx, "POST", "/internal/task-claim", strings.NewReader(claim))
					s.ServeHTTP(httptest.NewRecorder(), req)
				}()
				<-h.entered
				cancel() // the worker's connection broke: no answer reaches it

				var ans claimAnswer
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

// claimAtShutdown is the real driver whose claims wait for the server's
// shutdown to begin and, with leave, for the worker to have gone, before
// they run: a claim at the database while the server shuts down.
type claimAtShutdown struct {
	driver.Driver
	leave   bool
	once    sync.Once
	entered chan struct{}
}

func (c *claimAtShutdown) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	c.once.Do(func() { close(c.entered) })
	<-shuttingDown(ctx)
	// No signal says the server saw the connection close: ask until it has.
	for end := time.Now().Add(waitLimit); c.leave && !p.Abandoned() && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	return c.Driver.JobClaim(ctx, p)
}

// waitLimit bounds claimAtShutdown's wait for the server to see a closed
// connection.
const waitLimit = 10 * time.Second

// A claim under way when the server starts shutting down is answered to its
// worker, still there (the shutdown ends a long poll's wait, not the
// request), and rolled back if its worker left. The shutdown used to cancel
// every request: first such a claim was answered no tasks while its job stayed
// leased to the worker (helper-41), then, answered whatever the worker did,
// a worker that left during the shutdown had its job leased to nobody
// (helper-42). Over a real connection, through ListenAndServe.
func TestClaimUnderWayAtShutdown(t *testing.T) {
	for _, kind := range testdb.Kinds {
		for _, leave := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/worker_leaves=%v", kind, leave), func(t *testing.T) {
				d := &claimAtShutdown{Driver: testdb.Open(t, kind), leave: leave, entered: make(chan struct{})}
				c, err := drover.NewClient(d, nil)
				if err != nil {
					t.Fatal(err)
				}
				s := New(c, Config{})
				t.Cleanup(s.Close)
				if _, err := c.Enqueue(context.Background(), "k", nil, &drover.EnqueueOpts{MaxAttempts: 1}); err != nil {
					t.Fatal(err)
				}
				ctx, stop := context.WithCancel(context.Background())
				defer stop()
				addr, served := make(chan net.Addr, 1), make(chan error, 1)
				go func() {
					served <- ListenAndServe(ctx, s, ListenConfig{Addr: "127.0.0.1:0", Ready: func(a net.Addr) { addr <- a }}, nil)
				}()
				url := fmt.Sprintf("http://%s/internal/task-claim", <-addr)
				cctx, leaveNow := context.WithCancel(context.Background())
				defer leaveNow()
				answer := make(chan string, 1)
				go func() {
					req, _ := http.NewRequestWithContext(cctx, "POST", url,
						strings.NewReader(`{"worker_id":"w1","queues":["default"],"request_id":"R-shutdown","wait_seconds":5}`))
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						answer <- "error: " + err.Error()
						return
					}
					defer resp.Body.Close()
					b, _ := io.ReadAll(resp.Body)
					answer <- string(b)
				}()
				<-d.entered
				stop() // the server starts shutting down, the claim under way
				if leave {
					leaveNow()
				}
				got := <-answer
				if err := <-served; err != nil {
					t.Fatalf("ListenAndServe: %v", err)
				}
				j, err := c.Get(context.Background(), 1)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case !leave && (!strings.Contains(got, `"task_id":1`) || j.Status != drover.StatusRunning):
					t.Errorf("worker still there: answered %s, job %s; want its task answered", got, j.Status)
				case leave && (j.Status != drover.StatusQueued || j.Attempt != 0):
					t.Errorf("worker gone: job %s at attempt %d (answer %s); want the claim rolled back, queued at attempt 0", j.Status, j.Attempt, got)
				}
			})
		}
	}
}

// A claim resent (its answer was lost) when the server has begun shutting
// down is answered the tasks its first sending took: answered no tasks, the
// worker, for which a 200 is final, left them leased to nobody (helper-44).
func TestClaimResentAtShutdownIsReplayed(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			if code, _, body := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k","max_attempts":1}`)); code != http.StatusCreated {
				t.Fatalf("POST /jobs: %d %s", code, body)
			}
			claim := `{"worker_id":"w1","queues":["default"],"request_id":"R-lost"}`
			if code, _, body := call(t, s, "POST", "/internal/task-claim", "", []byte(claim)); !strings.Contains(string(body), `"task_id":1`) {
				t.Fatalf("first claim: %d %s", code, body) // its answer is lost
			}
			shutdown := make(chan struct{})
			close(shutdown) // the server has begun shutting down
			ctx := context.WithValue(context.Background(), shutdownKey{}, shutdown)
			req := httptest.NewRequestWithContext(ctx, "POST", "/internal/task-claim", strings.NewReader(claim))
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if !strings.Contains(rec.Body.String(), `"task_id":1`) || !strings.Contains(rec.Body.String(), `"replayed":true`) {
				t.Errorf("the resend at shutdown: %d %s; want task 1 replayed", rec.Code, rec.Body.String())
			}
		})
	}
}
