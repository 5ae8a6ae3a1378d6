package blackbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

// TestLifecycleOverHTTP walks every edge of DESIGN.md §2 that a client and a
// remote worker reach over HTTP, on both drivers, and checks the log
// GET /jobs/{id}/events shows: exactly one event per accepted transition, with
// the table's type, from and to, the attempt after it and who did it; nothing
// for a refused call or a repeated request_id; a log that lifecycle.CheckHistory
// replays as legal and that ends where the job is. The reaper's edges (stall,
// then requeue or fail) run on a server whose lease is short.
func TestLifecycleOverHTTP(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, kind)
			t.Run("complete", func(t *testing.T) { t.Parallel(); testLogComplete(t, s) })
			t.Run("retry-then-fail", func(t *testing.T) { t.Parallel(); testLogRetryThenFail(t, s) })
			t.Run("snooze", func(t *testing.T) { t.Parallel(); testLogSnooze(t, s) })
			t.Run("fail", func(t *testing.T) { t.Parallel(); testLogFail(t, s) })
			t.Run("cancel", func(t *testing.T) { t.Parallel(); testLogCancel(t, s) })
			t.Run("dlq-requeue", func(t *testing.T) { t.Parallel(); testLogDLQRequeue(t, s) })
			t.Run("reaper", func(t *testing.T) {
				t.Parallel()
				testLogReaper(t, startServer(t, kind, "--lease", "3s", "--leader-ttl", "2s"))
			})
		})
	}
}

// step is one expected event: type, from → to, attempt after it, and actor
// ("worker" stands for "worker:" and the claim's worker_id).
type step struct {
	typ      lifecycle.EventType
	from, to lifecycle.Status
	attempt  int
	actor    string
}

func (st step) String() string {
	from := string(st.from)
	if from == "" {
		from = "-"
	}
	return fmt.Sprintf("%s %s→%s attempt %d by %s", st.typ, from, st.to, st.attempt, st.actor)
}

const (
	stQueued    = lifecycle.StatusQueued
	stClaimed   = lifecycle.StatusClaimed
	stRunning   = lifecycle.StatusRunning
	stStalled   = lifecycle.StatusStalled
	stSucceeded = lifecycle.StatusSucceeded
	stFailed    = lifecycle.StatusFailed
	stCanceled  = lifecycle.StatusCanceled
)

func enqueued() step { return step{lifecycle.EventEnqueued, "", stQueued, 0, "client"} }

// claimedStarted is task-claim's two events: it claims and starts.
func claimedStarted(from lifecycle.Status, attempt int) []step {
	return []step{
		{lifecycle.EventClaimed, from, stClaimed, attempt, "worker"},
		{lifecycle.EventStarted, stClaimed, stRunning, attempt, "worker"},
	}
}

func steps(parts ...any) []step {
	var out []step
	for _, p := range parts {
		switch p := p.(type) {
		case step:
			out = append(out, p)
		case []step:
			out = append(out, p...)
		}
	}
	return out
}

// wantLog fails unless the job's log is exactly want, is legal, and ends where
// the job is now (status, attempt; its last seq no later than the job's rev).
func wantLog(t *testing.T, c *client, worker string, id int64, want []step) {
	t.Helper()
	var got struct {
		Events []lifecycle.Event `json:"events"`
	}
	r := c.want(200, "GET", fmt.Sprintf("/jobs/%d/events", id), nil, &got)
	var raw struct {
		Events []map[string]json.RawMessage `json:"events"`
	}
	_ = json.Unmarshal(r.body, &raw)
	for i, e := range raw.Events {
		for _, f := range []string{"job_id", "seq", "type", "from", "to", "at", "actor", "attempt"} {
			if _, ok := e[f]; !ok {
				t.Errorf("job %d event %d lacks %q: %s", id, i, f, r.body)
			}
		}
	}
	var lines []string
	for _, e := range got.Events {
		lines = append(lines, step{e.Type, e.From, e.To, e.Attempt, e.Actor}.String())
	}
	var wantLines []string
	for _, st := range want {
		if st.actor == "worker" {
			st.actor = "worker:" + worker
		}
		wantLines = append(wantLines, st.String())
	}
	if strings.Join(lines, "\n") != strings.Join(wantLines, "\n") {
		t.Fatalf("job %d log:\n\t%s\nwant:\n\t%s", id, strings.Join(lines, "\n\t"), strings.Join(wantLines, "\n\t"))
	}
	for _, e := range got.Events {
		if e.JobID != id || e.At.IsZero() {
			t.Errorf("job %d: event %+v has job_id %d, at %v", id, e, e.JobID, e.At)
		}
	}
	if err := lifecycle.CheckHistory(got.Events); err != nil {
		t.Errorf("job %d: lifecycle.CheckHistory: %v", id, err)
	}
	j := c.get(id)
	last := got.Events[len(got.Events)-1]
	if string(last.To) != j.Status || last.Attempt != j.Attempt || last.Seq > j.Rev {
		t.Errorf("job %d is %s attempt %d rev %d, but its log ends %s→%s attempt %d seq %d",
			id, j.Status, j.Attempt, j.Rev, last.From, last.To, last.Attempt, last.Seq)
	}
}

// lcClaim claims the one job of queue for worker, waiting up to wait seconds.
func lcClaim(c *client, worker, queue string, wait float64) task {
	c.t.Helper()
	ts := c.claim(map[string]any{"worker_id": worker, "queues": []string{queue}, "wait_seconds": wait})
	if len(ts) != 1 {
		c.t.Fatalf("claim from %s: %d tasks, want 1", queue, len(ts))
	}
	return ts[0]
}

func lcQueue(t *testing.T) string {
	return "lc." + strings.NewReplacer("/", ".", "_", "-").Replace(t.Name())
}

// complete: running → succeeded; a repeat with the request_id adds nothing, a
// later call with another is refused and adds nothing.
func testLogComplete(t *testing.T, s *server) {
	c := s.client(t, "")
	q := lcQueue(t)
	j := c.enqueue(map[string]any{"kind": "echo", "queue": q}, 201)
	tk := lcClaim(c, "w-complete", q, 0)
	c.want(200, "POST", "/internal/heartbeat", fence(tk), nil)
	done := with(fence(tk), "status", "succeeded", "output", map[string]any{"ok": true}, "request_id", "lc-complete-1")
	c.want(200, "POST", "/internal/task-complete", done, nil)
	c.want(200, "POST", "/internal/task-complete", done, nil)
	c.wantError(409, "lease_lost", "POST", "/internal/task-complete", with(done, "request_id", "lc-complete-2"))
	c.wantError(422, "invalid_transition", "POST", fmt.Sprintf("/jobs/%d/cancel", j.ID), nil)
	wantLog(t, c, "w-complete", j.ID, steps(enqueued(), claimedStarted(stQueued, 1),
		step{lifecycle.EventSucceeded, stRunning, stSucceeded, 1, "worker"}))
}

// retry while executions remain (running → queued), then retry with none left
// (running → failed).
func testLogRetryThenFail(t *testing.T, s *server) {
	c := s.client(t, "")
	q := lcQueue(t)
	j := c.enqueue(map[string]any{"kind": "echo", "queue": q, "max_attempts": 2}, 201)
	tk := lcClaim(c, "w-retry", q, 0)
	c.want(200, "POST", "/internal/task-complete", with(fence(tk), "status", "retry", "error", "first"), nil)
	tk = lcClaim(c, "w-retry", q, 30) // after the backoff
	var last job
	c.want(200, "POST", "/internal/task-complete", with(fence(tk), "status", "retry", "error", "second"), &last)
	if last.Status != "failed" || len(last.Errors) != 2 {
		t.Errorf("retry with no execution left: %s with %d errors, want failed with 2", last.Status, len(last.Errors))
	}
	wantLog(t, c, "w-retry", j.ID, steps(enqueued(),
		claimedStarted(stQueued, 1), step{lifecycle.EventRetried, stRunning, stQueued, 1, "worker"},
		claimedStarted(stQueued, 2), step{lifecycle.EventFailed, stRunning, stFailed, 2, "worker"}))
}

// snooze: running → queued without using an execution, so a max_attempts 1
// job runs again and succeeds.
func testLogSnooze(t *testing.T, s *server) {
	c := s.client(t, "")
	q := lcQueue(t)
	j := c.enqueue(map[string]any{"kind": "echo", "queue": q, "max_attempts": 1}, 201)
	tk := lcClaim(c, "w-snooze", q, 0)
	c.want(200, "POST", "/internal/task-complete", with(fence(tk), "status", "retry", "error", "later", "snooze_seconds", 0.2), nil)
	tk = lcClaim(c, "w-snooze", q, 30)
	c.want(200, "POST", "/internal/task-complete", with(fence(tk), "status", "succeeded"), nil)
	wantLog(t, c, "w-snooze", j.ID, steps(enqueued(),
		claimedStarted(stQueued, 1), step{lifecycle.EventSnoozed, stRunning, stQueued, 1, "worker"},
		claimedStarted(stQueued, 2), step{lifecycle.EventSucceeded, stRunning, stSucceeded, 2, "worker"}))
}

// fail: running → failed at once, whatever the budget; stale calls add nothing.
func testLogFail(t *testing.T, s *server) {
	c := s.client(t, "")
	q := lcQueue(t)
	j := c.enqueue(map[string]any{"kind": "echo", "queue": q, "max_attempts": 5}, 201)
	tk := lcClaim(c, "w-fail", q, 0)
	stale := fence(tk)
	stale["attempt"] = tk.Attempt + 1
	c.wantError(409, "lease_lost", "POST", "/internal/task-complete", with(stale, "status", "succeeded"))
	c.want(200, "POST", "/internal/task-complete", with(fence(tk), "status", "failed", "error", "permanent"), nil)
	c.wantError(409, "lease_lost", "POST", "/internal/heartbeat", fence(tk))
	wantLog(t, c, "w-fail", j.ID, steps(enqueued(), claimedStarted(stQueued, 1),
		step{lifecycle.EventFailed, stRunning, stFailed, 1, "worker"}))
}

// cancel: queued → canceled and running → canceled, by the operator; the
// running one's holder learns it from its heartbeat and can no longer report.
func testLogCancel(t *testing.T, s *server) {
	c := s.client(t, "")
	q := lcQueue(t)
	queued := c.enqueue(map[string]any{"kind": "echo", "queue": q, "run_at": "2100-01-01T00:00:00Z"}, 201)
	c.want(200, "POST", fmt.Sprintf("/jobs/%d/cancel", queued.ID), nil, nil)
	c.wantError(422, "invalid_transition", "POST", fmt.Sprintf("/jobs/%d/cancel", queued.ID), nil)
	wantLog(t, c, "", queued.ID, steps(enqueued(), step{lifecycle.EventCanceled, stQueued, stCanceled, 0, "operator"}))

	running := c.enqueue(map[string]any{"kind": "echo", "queue": q}, 201)
	tk := lcClaim(c, "w-cancel", q, 0)
	c.want(200, "POST", fmt.Sprintf("/jobs/%d/cancel", running.ID), nil, nil)
	var hb heartbeatAnswer
	c.want(200, "POST", "/internal/heartbeat", fence(tk), &hb)
	if !hb.CancelRequested {
		t.Errorf("heartbeat of a canceled job: cancel_requested false")
	}
	c.wantError(409, "lease_lost", "POST", "/internal/task-complete", with(fence(tk), "status", "succeeded"))
	wantLog(t, c, "w-cancel", running.ID, steps(enqueued(), claimedStarted(stQueued, 1),
		step{lifecycle.EventCanceled, stRunning, stCanceled, 1, "operator"}))
}

// DLQ requeue: a new job (enqueued by the operator, retry_of the old one);
// the failed job's log does not change.
func testLogDLQRequeue(t *testing.T, s *server) {
	c := s.client(t, "")
	q := lcQueue(t)
	j := c.enqueue(map[string]any{"kind": "echo", "queue": q, "max_attempts": 1}, 201)
	tk := lcClaim(c, "w-dlq", q, 0)
	c.want(200, "POST", "/internal/task-complete", with(fence(tk), "status", "failed", "error", "x"), nil)
	var n job
	c.want(201, "POST", fmt.Sprintf("/dlq/%d/requeue", j.ID), nil, &n)
	if n.RetryOf == nil || *n.RetryOf != j.ID || n.ID == j.ID {
		t.Errorf("DLQ requeue of job %d answered job %d retry_of %v, want a new job with retry_of %d", j.ID, n.ID, n.RetryOf, j.ID)
	}
	wantLog(t, c, "w-dlq", j.ID, steps(enqueued(), claimedStarted(stQueued, 1),
		step{lifecycle.EventFailed, stRunning, stFailed, 1, "worker"}))
	// The requeue is the operator's act, and the log says so.
	wantLog(t, c, "", n.ID, steps(step{lifecycle.EventEnqueued, "", stQueued, 0, "operator"}))
}

// reaper: a lease that runs out with executions left is stalled and
// requeued, and the next claim is attempt 2; with none left it is stalled and
// failed. The killed attempt's late report is refused.
func testLogReaper(t *testing.T, s *server) {
	c := s.client(t, "")
	q := lcQueue(t)
	again := c.enqueue(map[string]any{"kind": "echo", "queue": q + ".again", "max_attempts": 2}, 201)
	last := c.enqueue(map[string]any{"kind": "echo", "queue": q + ".last", "max_attempts": 1}, 201)
	tkAgain := lcClaim(c, "w-reap", q+".again", 0)
	tkLast := lcClaim(c, "w-reap", q+".last", 0)
	// The lease is 3 s and the reaper runs every second: wait for its
	// verdicts (there is no signal for them but the job's status).
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, l := c.get(again.ID), c.get(last.ID)
		if a.Status == "queued" && l.Status == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the expired jobs are %s and %s, want queued and failed", a.Status, l.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.wantError(409, "lease_lost", "POST", "/internal/task-complete", with(fence(tkAgain), "status", "succeeded"))
	c.wantError(409, "lease_lost", "POST", "/internal/task-complete", with(fence(tkLast), "status", "succeeded"))
	wantLog(t, c, "w-reap", last.ID, steps(enqueued(), claimedStarted(stQueued, 1),
		step{lifecycle.EventStalled, stRunning, stStalled, 1, "engine"},
		step{lifecycle.EventFailed, stStalled, stFailed, 1, "engine"}))
	tk := lcClaim(c, "w-reap", q+".again", 30)
	c.want(200, "POST", "/internal/task-complete", with(fence(tk), "status", "succeeded"), nil)
	wantLog(t, c, "w-reap", again.ID, steps(enqueued(), claimedStarted(stQueued, 1),
		step{lifecycle.EventStalled, stRunning, stStalled, 1, "engine"},
		step{lifecycle.EventRequeued, stStalled, stQueued, 1, "engine"},
		claimedStarted(stQueued, 2), step{lifecycle.EventSucceeded, stRunning, stSucceeded, 2, "worker"}))
}
