package drover_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/server"
)

// deafDriver is a real driver whose wake-up subscription hears nothing, as a
// library worker of another process hears nothing of a cancel on SQLite, or
// one whose listener was reconnecting on PostgreSQL (README: it hears the
// cancel at its next heartbeat).
type deafDriver struct{ driver.Driver }

func (deafDriver) WakeupSubscribe(ctx context.Context) (<-chan string, error) {
	ch := make(chan string)
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

type recordingObserver struct {
	mu       sync.Mutex
	lost     []int64
	finished map[int64]string
	done     chan struct{}
}

func (o *recordingObserver) Claimed(string, int) {}
func (o *recordingObserver) Finished(j *drover.Job, outcome string, _ time.Duration) {
	o.mu.Lock()
	o.finished[j.ID] = outcome
	o.mu.Unlock()
	o.done <- struct{}{}
}
func (o *recordingObserver) LeaseLost(j *drover.Job) {
	o.mu.Lock()
	o.lost = append(o.lost, j.ID)
	o.mu.Unlock()
	o.done <- struct{}{}
}

// A job canceled by an operator while its handler ran, whose worker learns of
// the cancel only from its report's refusal (the handler returned before the
// next heartbeat: a worker of another process on SQLite, or a lost pointer),
// is told as canceled (Observer.Finished "canceled", Stats.Canceled), not as
// a lost lease, which Observer.LeaseLost says a cancel is not: it was, the
// alert on lost leases going off at every such cancel (helper-89).
func TestCanceledJobsRefusedReportIsNotALostLease(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		url := testdb.URL(t, kind)
		wc, err := drover.NewClient(deafDriver{testdb.OpenURL(t, kind, url)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The operator's: another process (another driver on the database).
		op, err := drover.NewClient(testdb.OpenURL(t, kind, url), nil)
		if err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		started := make(chan struct{}, 1)
		ws := drover.NewWorkers()
		drover.Register(ws, "quick", func(ctx context.Context, _ *drover.Job, _ struct{}) (any, error) {
			started <- struct{}{}
			<-gate
			return nil, errors.New("the handler's error") // or a success: the same
		})
		obs := &recordingObserver{finished: map[int64]string{}, done: make(chan struct{}, 4)}
		cfg := fastWorkerConfig(ws)
		cfg.LeaseDuration, cfg.HeartbeatInterval = time.Hour, 30*time.Minute
		cfg.Observer = obs
		w := startWorker(t, wc, cfg)
		j := enqueue(t, op, "quick", nil, nil)
		waitChan(t, started, "the handler to start")
		if _, err := op.Cancel(context.Background(), j.ID); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		close(gate)
		waitChan(t, obs.done, "the worker to end the job")
		obs.mu.Lock()
		defer obs.mu.Unlock()
		if got := getJob(t, op, j.ID); got.Status != drover.StatusCanceled {
			t.Fatalf("job: %s", describe(got))
		}
		if len(obs.lost) != 0 || w.Stats().LeaseLost.Load() != 0 {
			t.Errorf("a job canceled by an operator was reported as a lost lease: Observer.LeaseLost(%v), Stats.LeaseLost=%d, Stats.Canceled=%d, Finished=%v; "+
				"the docs say a cancel is not one (Finished \"canceled\")", obs.lost, w.Stats().LeaseLost.Load(), w.Stats().Canceled.Load(), obs.finished)
		}
	})
}

// drover_lease_lost_total counts "heartbeats and reports rejected because the
// lease was lost (a canceled job's are not)": a remote worker's report of a
// job canceled while it ran was counted there (helper-89). A report with a
// stale token still is.
func TestServerCountsNoLostLeaseForACanceledJobsReport(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{})
		var hdr http.Header // the last answer's
		post := func(path, body string) (int, string) {
			resp, err := http.Post(ts.url+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			hdr = resp.Header
			return resp.StatusCode, string(b)
		}
		j := enqueue(t, ts.c, "k", nil, nil)
		code, body := post("/internal/task-claim", `{"worker_id":"w1","queues":["default"],"limit":1}`)
		var claim struct {
			Tasks []struct {
				TaskID     int64  `json:"task_id"`
				Attempt    int    `json:"attempt"`
				LeaseToken string `json:"lease_token"`
			} `json:"tasks"`
		}
		if err := json.Unmarshal([]byte(body), &claim); code != 200 || err != nil || len(claim.Tasks) != 1 || claim.Tasks[0].TaskID != j.ID {
			t.Fatalf("claim: %d %s", code, body)
		}
		task := claim.Tasks[0]
		if _, err := ts.c.Cancel(context.Background(), j.ID); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		code, body = post("/internal/task-complete", fmt.Sprintf(`{"task_id":%d,"attempt":%d,"lease_token":%q,"status":"succeeded","output":{"ok":true},"request_id":"r1"}`,
			task.TaskID, task.Attempt, task.LeaseToken))
		if code != http.StatusConflict || hdr.Get(server.JobStatusHeader) != "canceled" || hdr.Get(server.JobAttemptHeader) != "1" {
			t.Fatalf("report of a canceled job: %d %s %v, want 409 whose headers say the job is canceled at attempt 1", code, body, hdr)
		}
		lostTotal := func() string {
			resp, err := http.Get(ts.url + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			m, _ := io.ReadAll(resp.Body)
			for _, line := range strings.Split(string(m), "\n") {
				if strings.HasPrefix(line, "drover_lease_lost_total ") {
					return line
				}
			}
			return "drover_lease_lost_total missing"
		}
		if got := lostTotal(); got != "drover_lease_lost_total 0" {
			t.Errorf("after one report refused because an operator canceled the job (409 %s): %q, want 0", strings.TrimSpace(body), got)
		}
		// A stale token's report is a lost lease, and counted.
		k := enqueue(t, ts.c, "k", nil, nil)
		code, body = post("/internal/task-claim", `{"worker_id":"w1","queues":["default"],"limit":1}`)
		if err := json.Unmarshal([]byte(body), &claim); code != 200 || err != nil || len(claim.Tasks) != 1 || claim.Tasks[0].TaskID != k.ID {
			t.Fatalf("claim: %d %s", code, body)
		}
		code, body = post("/internal/task-complete", fmt.Sprintf(`{"task_id":%d,"attempt":%d,"lease_token":"00000000-0000-0000-0000-000000000000","status":"succeeded"}`,
			k.ID, claim.Tasks[0].Attempt))
		if code != http.StatusConflict {
			t.Fatalf("report with a stale token: %d %s, want 409", code, body)
		}
		if got := lostTotal(); got != "drover_lease_lost_total 1" {
			t.Errorf("after a report with a stale token: %q, want 1", got)
		}
	})
}

// deafToCancels forwards every request to upstream but the task-cancels long
// polls, which it holds until the client gives up: the worker hears of no
// cancel, as when its pointer is lost.
type deafToCancels struct{ upstream string }

func (p deafToCancels) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body) // read first: the server then sees the client go
	if r.URL.Path == "/internal/task-cancels" {
		<-r.Context().Done()
		return
	}
	if a, ok := relay(w, r, p.upstream, body); ok {
		a.write(w)
	}
}

// A remote worker whose report is refused because the job was canceled while
// it ran tells it as canceled, not as a lost lease: the server's 409 says the
// job's status and attempt (error.job_status, error.attempt).
func TestRemoteWorkerTellsACanceledJobsRefusedReportAsCanceled(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{LeaseDuration: time.Hour})
		ps := httptest.NewServer(deafToCancels{ts.url})
		t.Cleanup(ps.Close)
		gate := make(chan struct{})
		started := make(chan struct{}, 1)
		ws := drover.NewWorkers()
		drover.Register(ws, "quick", func(ctx context.Context, _ *drover.Job, _ struct{}) (any, error) {
			started <- struct{}{}
			<-gate
			return "done", nil
		})
		obs := &recordingObserver{finished: map[int64]string{}, done: make(chan struct{}, 4)}
		cfg := fastWorkerConfig(ws)
		cfg.LeaseDuration, cfg.HeartbeatInterval = time.Hour, 30*time.Minute
		cfg.Observer = obs
		w := startRemoteWorker(t, drover.RemoteConfig{URL: ps.URL, WaitSeconds: 1}, cfg)
		j := enqueue(t, ts.c, "quick", nil, nil)
		waitChan(t, started, "the handler to start")
		if _, err := ts.c.Cancel(context.Background(), j.ID); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		close(gate)
		waitChan(t, obs.done, "the worker to end the job")
		obs.mu.Lock()
		defer obs.mu.Unlock()
		if len(obs.lost) != 0 || w.Stats().LeaseLost.Load() != 0 || obs.finished[j.ID] != "canceled" || w.Stats().Canceled.Load() != 1 {
			t.Errorf("a job canceled while it ran: Observer.LeaseLost(%v), Stats.LeaseLost=%d, Stats.Canceled=%d, Finished=%v; want it told as canceled",
				obs.lost, w.Stats().LeaseLost.Load(), w.Stats().Canceled.Load(), obs.finished)
		}
	})
}
