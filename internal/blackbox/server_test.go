package blackbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/testdb"
)

// TestServer runs the black-box list against one `drover server` process
// per driver (and a second one with tokens for auth). Subtests use queues of
// their own, so they run in parallel against the same process.
func TestServer(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, kind)
			t.Run("health", func(t *testing.T) { t.Parallel(); testHealth(t, s) })
			t.Run("enqueue", func(t *testing.T) { t.Parallel(); testEnqueue(t, s) })
			t.Run("idempotent", func(t *testing.T) { t.Parallel(); testIdempotent(t, s) })
			t.Run("claim-heartbeat-complete", func(t *testing.T) { t.Parallel(); testClaimHeartbeatComplete(t, s) })
			t.Run("stale", func(t *testing.T) { t.Parallel(); testStale(t, s) })
			t.Run("dlq", func(t *testing.T) { t.Parallel(); testDLQ(t, s) })
			t.Run("cancel", func(t *testing.T) { t.Parallel(); testCancel(t, s) })
			t.Run("pause-resume", func(t *testing.T) { t.Parallel(); testPauseResume(t, s) })
			t.Run("long-poll", func(t *testing.T) { t.Parallel(); testLongPoll(t, s) })
			t.Run("errors", func(t *testing.T) { t.Parallel(); testErrors(t, s) })
			t.Run("bad-input", func(t *testing.T) { t.Parallel(); testBadInput(t, s) })
			t.Run("auth", func(t *testing.T) { t.Parallel(); testAuth(t, kind) })
			t.Run("browser-guards", func(t *testing.T) { t.Parallel(); testBrowserGuards(t, s) })
			t.Run("claim-replay", func(t *testing.T) { t.Parallel(); testClaimReplay(t, s) })
		})
	}
}

func testHealth(t *testing.T, s *server) {
	c := s.client(t, "")
	var h map[string]any
	c.want(200, "GET", "/healthz", nil, &h)
	if h["status"] != "ok" || h["database"] != "ok" || h["driver"] != s.kind {
		t.Errorf("GET /healthz = %v, want status ok, database ok, driver %s", h, s.kind)
	}
	if _, ok := h["leader"].(bool); !ok {
		t.Errorf("GET /healthz = %v, want leader true or false", h)
	}
	r := c.want(200, "GET", "/openapi.json", nil, nil)
	var doc struct{ OpenAPI string }
	if err := json.Unmarshal(r.body, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("GET /openapi.json: openapi %q, %v", doc.OpenAPI, err)
	}
}

func testEnqueue(t *testing.T, s *server) {
	c := s.client(t, "")
	before := time.Now().Add(-time.Second)
	j := c.enqueue(map[string]any{"kind": "bb.enqueue", "queue": "bb-enqueue", "args": map[string]any{"n": 1},
		"priority": 2, "max_attempts": 4, "timeout_seconds": 30, "metadata": map[string]any{"m": "x"}}, 201)
	if j.ID < 1 || j.Kind != "bb.enqueue" || j.Queue != "bb-enqueue" || j.Status != "queued" || j.Attempt != 0 ||
		j.MaxAttempts != 4 || j.Priority != 2 || j.Rev < 1 {
		t.Errorf("enqueued job = %+v", j)
	}
	jsonEq(t, "args", j.Args, `{"n":1}`)
	jsonEq(t, "metadata", j.Metadata, `{"m":"x"}`)
	jsonEq(t, "result", j.Result, `null`)
	if j.Error != nil || len(j.Errors) != 0 || j.StartedAt != nil || j.FinishedAt != nil {
		t.Errorf("new job has error %v, errors %v, started_at %v, finished_at %v; want none", j.Error, j.Errors, j.StartedAt, j.FinishedAt)
	}
	if j.TimeoutSeconds == nil || *j.TimeoutSeconds != 30 {
		t.Errorf("timeout_seconds = %v, want 30", j.TimeoutSeconds)
	}
	if j.CreatedAt.Before(before) || j.RunAt.Before(before) || j.RunAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("created_at %v, run_at %v: want about now", j.CreatedAt, j.RunAt)
	}
	if got := c.get(j.ID); got.ID != j.ID || got.Rev != j.Rev || got.Status != "queued" {
		t.Errorf("GET /jobs/%d = %+v, want the enqueued job", j.ID, got)
	}
	// Defaults, and a future run_at.
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	d := c.enqueue(map[string]any{"kind": "bb.defaults", "run_at": at.Format(time.RFC3339)}, 201)
	if d.Queue != "default" || d.Priority != 0 || d.MaxAttempts < 1 || !d.RunAt.Equal(at) || d.TimeoutSeconds != nil {
		t.Errorf("job with defaults = %+v, want queue default, priority 0, run_at %v", d, at)
	}
	jsonEq(t, "args", d.Args, `{}`)
	// The list finds it by kind and status.
	var p page
	c.want(200, "GET", "/jobs?kind=bb.enqueue&status=queued", nil, &p)
	if len(p.Jobs) != 1 || p.Jobs[0].ID != j.ID {
		t.Errorf("GET /jobs?kind=bb.enqueue = %+v, want job %d", p.Jobs, j.ID)
	}
	// A repeated status adds to the filter, as a comma does.
	for _, q := range []string{"status=canceled&status=queued", "status=canceled,queued", "status=queued&status=canceled"} {
		c.want(200, "GET", "/jobs?kind=bb.enqueue&"+q, nil, &p)
		if len(p.Jobs) != 1 || p.Jobs[0].ID != j.ID {
			t.Errorf("GET /jobs?kind=bb.enqueue&%s = %+v, want job %d", q, p.Jobs, j.ID)
		}
	}
}

func testIdempotent(t *testing.T, s *server) {
	c := s.client(t, "")
	body := map[string]any{"kind": "bb.idem", "queue": "bb-idem", "args": map[string]any{"n": 1}, "idempotency_key": "bb-key-1"}
	first := c.enqueue(body, 201)
	again := c.enqueue(body, 200)
	other := c.enqueue(with(body, "args", map[string]any{"n": 2}), 200)
	if again.ID != first.ID || other.ID != first.ID {
		t.Errorf("re-enqueue with the same key: ids %d, %d; want %d", again.ID, other.ID, first.ID)
	}
	jsonEq(t, "args of the existing job", other.Args, `{"n":1}`)
	fresh := c.enqueue(with(body, "idempotency_key", "bb-key-2"), 201)
	if fresh.ID == first.ID {
		t.Errorf("another key gave the same job %d", fresh.ID)
	}
}

func testClaimHeartbeatComplete(t *testing.T, s *server) {
	c := s.client(t, "")
	q := "bb-work"
	j := c.enqueue(map[string]any{"kind": "bb.add", "queue": q, "args": map[string]any{"a": 1, "b": 2}, "timeout_seconds": 5}, 201)
	claimedAt := time.Now()
	tk := c.claimOne(q)
	if tk.TaskID != j.ID || tk.Attempt != 1 || tk.LeaseToken == "" || tk.Kind != "bb.add" ||
		tk.TimeoutSeconds == nil || *tk.TimeoutSeconds != 5 {
		t.Fatalf("task = %+v, want job %d, attempt 1, a lease token, timeout 5", tk, j.ID)
	}
	jsonEq(t, "task args", tk.Args, `{"a":1,"b":2}`)
	if !tk.LeaseExpiresAt.After(claimedAt) || tk.LeaseExpiresAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("lease_expires_at %v, want within the %s lease", tk.LeaseExpiresAt, lease)
	}
	if got := c.get(j.ID); got.Status != "running" || got.Attempt != 1 || got.StartedAt == nil {
		t.Errorf("claimed job = %+v, want running, attempt 1, started", got)
	}
	if ts := c.claim(map[string]any{"worker_id": "bb-other", "queues": []string{q}}); len(ts) != 0 {
		t.Errorf("a second claim got %+v; the job is leased", ts)
	}

	var hb heartbeatAnswer
	c.want(200, "POST", "/internal/heartbeat", fence(tk), &hb)
	if hb.CancelRequested || hb.LeaseExpiresAt == nil || hb.LeaseExpiresAt.Before(tk.LeaseExpiresAt) {
		t.Errorf("heartbeat = %+v, want the lease extended from %v, cancel_requested false", hb, tk.LeaseExpiresAt)
	}
	if hb.LeaseSeconds == nil || *hb.LeaseSeconds != tk.LeaseSeconds {
		t.Errorf("heartbeat lease_seconds = %v, want the claim's %v", hb.LeaseSeconds, tk.LeaseSeconds)
	}

	var done job
	r := c.want(200, "POST", "/internal/task-complete",
		with(fence(tk), "status", "succeeded", "output", map[string]any{"sum": 3}, "request_id", "bb-done-1"), &done)
	checkJobFields(t, r.body)
	if done.ID != j.ID || done.Status != "succeeded" || done.FinishedAt == nil || done.Error != nil {
		t.Errorf("completed job = %+v, want succeeded and finished", done)
	}
	jsonEq(t, "result", done.Result, `{"sum":3}`)
	got := c.get(j.ID)
	if got.Status != "succeeded" || got.Rev != done.Rev {
		t.Errorf("GET after complete = %+v, want the completed job (rev %d)", got, done.Rev)
	}
	jsonEq(t, "stored result", got.Result, `{"sum":3}`)

	var evs struct {
		Events []struct{ Type string }
	}
	c.want(200, "GET", fmt.Sprintf("/jobs/%d/events", j.ID), nil, &evs)
	var types []string
	for _, e := range evs.Events {
		types = append(types, e.Type)
	}
	for _, want := range []string{"enqueued", "claimed", "started", "succeeded"} {
		if !slices.Contains(types, want) {
			t.Errorf("events %v lack %q", types, want)
		}
	}
}

func testStale(t *testing.T, s *server) {
	c := s.client(t, "")
	q := "bb-stale"
	j := c.enqueue(map[string]any{"kind": "bb.stale", "queue": q}, 201)
	tk := c.claimOne(q)

	// A wrong token or attempt for a running job: 409, nothing changes.
	before := c.get(j.ID)
	for _, f := range []map[string]any{
		with(fence(tk), "lease_token", "00000000-0000-4000-8000-000000000000"),
		with(fence(tk), "lease_token", "not-a-token"),
		with(fence(tk), "attempt", tk.Attempt+1),
	} {
		c.wantError(409, "lease_lost", "POST", "/internal/task-complete", with(f, "status", "succeeded", "output", 1, "request_id", "bb-stale-x"))
		c.wantError(409, "lease_lost", "POST", "/internal/heartbeat", f)
	}
	same(t, "stale reports", before, c.get(j.ID))

	// The holder completes; the same request_id again gets the first answer.
	complete := with(fence(tk), "status", "succeeded", "output", "first", "request_id", "bb-stale-1")
	var first, replay job
	c.want(200, "POST", "/internal/task-complete", complete, &first)
	afterFirst := c.get(j.ID)
	c.want(200, "POST", "/internal/task-complete", complete, &replay)
	if replay.ID != first.ID || replay.Rev != first.Rev || replay.Status != "succeeded" || !bytes.Equal(replay.Result, first.Result) {
		t.Errorf("repeated request_id: %+v, want the first answer %+v", replay, first)
	}
	same(t, "a repeated request_id", afterFirst, c.get(j.ID))

	// Reports after the job left running (new request_ids): 409, nothing changes.
	for _, body := range []map[string]any{
		with(fence(tk), "status", "failed", "error", "late", "request_id", "bb-stale-2"),
		with(fence(tk), "status", "succeeded", "output", "second", "request_id", "bb-stale-3"),
		with(fence(tk), "status", "retry", "error", "late"),
	} {
		c.wantError(409, "lease_lost", "POST", "/internal/task-complete", body)
	}
	c.wantError(409, "lease_lost", "POST", "/internal/heartbeat", fence(tk))
	after := c.get(j.ID)
	same(t, "late reports", afterFirst, after)
	jsonEq(t, "result after late reports", after.Result, `"first"`)

	// A request_id is a report's, of one attempt: the next attempt's holder
	// reusing it is refused with 409 conflict naming request_id and nothing
	// changes (it used to be answered 200 as a repeat, its report dropped,
	// and then 400, as if the report were malformed).
	j2 := c.enqueue(map[string]any{"kind": "bb.stale", "queue": q + "-again"}, 201)
	tk1 := c.claimOne(q + "-again")
	c.want(200, "POST", "/internal/task-complete",
		with(fence(tk1), "status", "retry", "error", "try again", "snooze_seconds", 0, "request_id", "bb-again"), nil)
	tk2 := c.claimOne(q + "-again")
	if tk2.TaskID != j2.ID || tk2.Attempt != tk1.Attempt+1 {
		t.Fatalf("second claim = task %d attempt %d, want job %d attempt %d", tk2.TaskID, tk2.Attempt, j2.ID, tk1.Attempt+1)
	}
	running := c.get(j2.ID)
	msg := c.wantError(409, "conflict", "POST", "/internal/task-complete",
		with(fence(tk2), "status", "succeeded", "output", 2, "request_id", "bb-again"))
	if !strings.Contains(msg, "request_id") {
		t.Errorf("reused request_id: message %q does not name request_id", msg)
	}
	same(t, "a report reusing an earlier attempt's request_id", running, c.get(j2.ID))
	var done job
	c.want(200, "POST", "/internal/task-complete", with(fence(tk2), "status", "succeeded", "output", 2, "request_id", "bb-again-2"), &done)
	if done.Status != "succeeded" {
		t.Errorf("completion with a fresh request_id: %s, want succeeded", done.Status)
	}
}

func testDLQ(t *testing.T, s *server) {
	c := s.client(t, "")
	q := "bb-dlq"
	j := c.enqueue(map[string]any{"kind": "bb.fail", "queue": q, "args": map[string]any{"x": 1}, "max_attempts": 3}, 201)
	tk := c.claimOne(q)
	var failed job
	c.want(200, "POST", "/internal/task-complete", with(fence(tk), "status", "failed", "error", "boom", "stack", "at line 1"), &failed)
	if failed.Status != "failed" || failed.Error == nil || *failed.Error != "boom" || len(failed.Errors) != 1 ||
		failed.Errors[0].Error != "boom" || failed.Errors[0].Attempt != 1 || failed.FinishedAt == nil {
		t.Fatalf("failed job = %+v, want failed with error boom in its history", failed)
	}

	var dlq page
	c.want(200, "GET", "/dlq?queue="+q, nil, &dlq)
	if len(dlq.Jobs) != 1 || dlq.Jobs[0].ID != j.ID || dlq.Jobs[0].Status != "failed" {
		t.Fatalf("GET /dlq?queue=%s = %+v, want job %d", q, dlq.Jobs, j.ID)
	}

	var re job
	r := c.want(201, "POST", fmt.Sprintf("/dlq/%d/requeue", j.ID), nil, &re)
	checkJobFields(t, r.body)
	if re.ID == j.ID || re.RetryOf == nil || *re.RetryOf != j.ID || re.Status != "queued" || re.Attempt != 0 || re.Kind != "bb.fail" {
		t.Errorf("requeued job = %+v, want a new queued job with retry_of %d", re, j.ID)
	}
	jsonEq(t, "requeued args", re.Args, `{"x":1}`)
	if loc := r.header.Get("Location"); loc != fmt.Sprintf("/jobs/%d", re.ID) {
		t.Errorf("Location %q, want /jobs/%d", loc, re.ID)
	}
	if old := c.get(j.ID); old.Status != "failed" {
		t.Errorf("the failed job is now %s; it stays as the record", old.Status)
	}
	// A failed job is requeued at most once: a repeat (a retried request, a
	// second click) answers 200 with the first requeue's job and enqueues nothing.
	var again job
	r = c.want(200, "POST", fmt.Sprintf("/dlq/%d/requeue", j.ID), nil, &again)
	if again.ID != re.ID || again.Status != "queued" {
		t.Errorf("repeated requeue = job %d (%s), want job %d again", again.ID, again.Status, re.ID)
	}
	if loc := r.header.Get("Location"); loc != fmt.Sprintf("/jobs/%d", re.ID) {
		t.Errorf("repeated requeue: Location %q, want /jobs/%d", loc, re.ID)
	}
	if tk2 := c.claimOne(q); tk2.TaskID != re.ID {
		t.Errorf("claimed %d, want the requeued job %d", tk2.TaskID, re.ID)
	}
	c.want(200, "POST", fmt.Sprintf("/dlq/%d/requeue", j.ID), nil, &again)
	if again.ID != re.ID || again.Status != "running" {
		t.Errorf("requeue repeated while its job runs = job %d (%s), want job %d, running", again.ID, again.Status, re.ID)
	}
	var all page
	c.want(200, "GET", "/jobs?queue="+q, nil, &all)
	if len(all.Jobs) != 2 {
		t.Errorf("queue %s holds %d jobs after three requeues of one failed job, want 2", q, len(all.Jobs))
	}
	// Only failed jobs can be requeued.
	c.wantError(422, "invalid_transition", "POST", fmt.Sprintf("/dlq/%d/requeue", re.ID), nil)

	// A retry with attempts left goes back to the queue, not the DLQ.
	j2 := c.enqueue(map[string]any{"kind": "bb.retry", "queue": q + "-retry", "max_attempts": 2}, 201)
	tk3 := c.claimOne(q + "-retry")
	var retried job
	c.want(200, "POST", "/internal/task-complete", with(fence(tk3), "status", "retry", "error", "flaky"), &retried)
	if retried.ID != j2.ID || retried.Status != "queued" || len(retried.Errors) != 1 || retried.Errors[0].Error != "flaky" {
		t.Errorf("retried job = %+v, want queued again with the error in its history", retried)
	}
}

func testCancel(t *testing.T, s *server) {
	c := s.client(t, "")
	q := "bb-cancel"
	j := c.enqueue(map[string]any{"kind": "bb.long", "queue": q}, 201)
	tk := c.claimOne(q)
	var hb heartbeatAnswer
	c.want(200, "POST", "/internal/heartbeat", fence(tk), &hb)
	if hb.CancelRequested {
		t.Fatalf("heartbeat before cancel: cancel_requested true")
	}
	var canceled job
	c.want(200, "POST", fmt.Sprintf("/jobs/%d/cancel", j.ID), nil, &canceled)
	if canceled.Status != "canceled" || canceled.FinishedAt == nil {
		t.Errorf("cancel answered %+v, want canceled", canceled)
	}
	c.want(200, "POST", "/internal/heartbeat", fence(tk), &hb)
	if !hb.CancelRequested {
		t.Errorf("heartbeat after cancel = %+v, want cancel_requested true", hb)
	}
	// The worker's late report does not revive the job.
	c.wantError(409, "lease_lost", "POST", "/internal/task-complete", with(fence(tk), "status", "succeeded", "output", 1))
	if got := c.get(j.ID); got.Status != "canceled" {
		t.Errorf("job after the late report is %s, want canceled", got.Status)
	}
	// A queued job is canceled at once and never claimed.
	k := c.enqueue(map[string]any{"kind": "bb.never", "queue": q}, 201)
	c.want(200, "POST", fmt.Sprintf("/jobs/%d/cancel", k.ID), nil, nil)
	if ts := c.claim(map[string]any{"worker_id": "bb-w", "queues": []string{q}}); len(ts) != 0 {
		t.Errorf("claimed %+v after cancel", ts)
	}
}

func testPauseResume(t *testing.T, s *server) {
	c := s.client(t, "")
	q := "bb-pause"
	var st struct {
		Name   string
		Paused bool
	}
	c.want(200, "POST", "/queues/"+q+"/pause", nil, &st)
	if st.Name != q || !st.Paused {
		t.Errorf("pause answered %+v", st)
	}
	j := c.enqueue(map[string]any{"kind": "bb.paused", "queue": q}, 201)
	if ts := c.claim(map[string]any{"worker_id": "bb-w", "queues": []string{q}, "limit": 5}); len(ts) != 0 {
		t.Fatalf("claim from a paused queue got %+v", ts)
	}
	if ts := c.claim(map[string]any{"worker_id": "bb-w", "task_id": j.ID}); len(ts) != 0 {
		t.Fatalf("claim by id from a paused queue got %+v", ts)
	}
	// A claim by id that names queues takes only a job of one of them.
	other := c.enqueue(map[string]any{"kind": "bb.other", "queue": q + "-other"}, 201)
	if ts := c.claim(map[string]any{"worker_id": "bb-w", "queues": []string{q}, "task_id": other.ID}); len(ts) != 0 {
		t.Fatalf("claim by id of a job of queue %s-other, naming queue %s, got %+v", q, q, ts)
	}
	if got := c.get(other.ID); got.Status != "queued" || got.Attempt != 0 {
		t.Fatalf("the job of the other queue is %s at attempt %d after that claim, want queued at 0", got.Status, got.Attempt)
	}
	if ts := c.claim(map[string]any{"worker_id": "bb-w", "queues": []string{q + "-other"}, "task_id": other.ID}); len(ts) != 1 || ts[0].TaskID != other.ID {
		t.Fatalf("claim by id naming the job's own queue got %+v, want job %d", ts, other.ID)
	}
	if ts := c.claim(map[string]any{"worker_id": "bb-w", "queues": []string{q}, "wait_seconds": 0.3}); len(ts) != 0 {
		t.Fatalf("long-poll on a paused queue got %+v", ts)
	}
	var qs struct {
		Queues []struct {
			Name   string
			Paused bool
			Counts map[string]int
		}
	}
	c.want(200, "GET", "/queues", nil, &qs)
	found := false
	for _, x := range qs.Queues {
		if x.Name == q {
			found = true
			if !x.Paused || x.Counts["queued"] != 1 || len(x.Counts) != 11 {
				t.Errorf("GET /queues: %s = %+v, want paused with 1 queued and every status counted", q, x)
			}
		}
	}
	if !found {
		t.Errorf("GET /queues lacks %s: %+v", q, qs.Queues)
	}
	c.want(200, "POST", "/queues/"+q+"/resume", nil, &st)
	if st.Paused {
		t.Errorf("resume answered %+v", st)
	}
	if tk := c.claimOne(q); tk.TaskID != j.ID {
		t.Errorf("after resume claimed %d, want %d", tk.TaskID, j.ID)
	}
}

// testLongPoll checks that a task-claim waits when nothing is ready, and returns
// a job enqueued during the wait promptly rather than at the end of the wait.
func testLongPoll(t *testing.T, s *server) {
	c := s.client(t, "")
	q := "bb-poll"
	start := time.Now()
	if ts := c.claim(map[string]any{"worker_id": "bb-w", "queues": []string{q}, "wait_seconds": 0.5}); len(ts) != 0 {
		t.Fatalf("long-poll on an empty queue got %+v", ts)
	}
	if took := time.Since(start); took < 450*time.Millisecond {
		t.Errorf("long-poll of 0.5s on an empty queue returned after %v", took)
	}

	// Enqueue once the claim request is on the wire.
	sent := make(chan struct{})
	var once sync.Once
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(sent) }) }}
	type result struct {
		status int
		body   []byte
		at     time.Time
		err    error
	}
	res := make(chan result, 1)
	go func() {
		body := fmt.Sprintf(`{"worker_id":"bb-poller","queues":[%q],"wait_seconds":30}`, q)
		ctx := httptrace.WithClientTrace(context.Background(), trace)
		req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/internal/task-claim", strings.NewReader(body))
		resp, err := httpClient.Do(req)
		if err != nil {
			res <- result{err: err}
			return
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		res <- result{resp.StatusCode, buf.Bytes(), time.Now(), err}
	}()
	select {
	case <-sent:
	case r := <-res:
		t.Fatalf("claim returned before the job existed: %+v", r)
	}
	enqueuedAt := time.Now()
	j := c.enqueue(map[string]any{"kind": "bb.poll", "queue": q}, 201)
	r := <-res
	if r.err != nil || r.status != 200 {
		t.Fatalf("long-poll: %d %s %v", r.status, r.body, r.err)
	}
	var got struct{ Tasks []task }
	if err := json.Unmarshal(r.body, &got); err != nil || len(got.Tasks) != 1 || got.Tasks[0].TaskID != j.ID {
		t.Fatalf("long-poll answered %s, want job %d", r.body, j.ID)
	}
	if took := r.at.Sub(enqueuedAt); took > 3*time.Second {
		t.Errorf("long-poll returned %v after the enqueue, want promptly (the wait was 30s)", took)
	}
}

// testBrowserGuards: a server on loopback without tokens (this one) answers only
// to loopback host names, so a page whose name an attacker re-points at
// 127.0.0.1 (DNS rebinding) can neither read nor change jobs; and a
// state-changing request a browser sends from another site is refused.
func testBrowserGuards(t *testing.T, s *server) {
	c := s.client(t, "")
	send := func(method, path, host string, hdr map[string]string, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		r := c.send(req)
		if r.status >= 400 {
			checkError(t, r)
		}
		return r.status
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(s.base, "http://"), ":")
	rebound := "rebind.attacker.example:" + port
	if code := send("GET", "/jobs", rebound, nil, ""); code != 403 {
		t.Errorf("GET /jobs with Host %s: %d, want 403", rebound, code)
	}
	if code := send("POST", "/jobs", rebound, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + rebound, "Content-Type": "text/plain"}, `{"kind":"bb.rebind"}`); code != 403 {
		t.Errorf("POST /jobs from a rebound page: %d, want 403", code)
	}
	if code := send("POST", "/jobs", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}, `{"kind":"bb.crosssite"}`); code != 403 {
		t.Errorf("POST /jobs from another site: %d, want 403", code)
	}
	for _, host := range []string{"", "localhost:" + port, "[::1]:" + port} {
		if code := send("GET", "/healthz", host, nil, ""); code != 200 {
			t.Errorf("GET /healthz with Host %q: %d, want 200", host, code)
		}
	}
	var p page
	c.want(200, "GET", "/jobs?kind=bb.rebind", nil, &p)
	if len(p.Jobs) != 0 {
		t.Errorf("refused requests enqueued %+v", p.Jobs)
	}
}

// testClaimReplay: a claim repeated with its request_id (its answer was lost)
// answers the same tasks, with the same leases, and claims nothing more; the
// jobs' attempts and executions do not move.
func testClaimReplay(t *testing.T, s *server) {
	c := s.client(t, "")
	q := "bb-claim-replay"
	a := c.enqueue(map[string]any{"kind": "bb.replay", "queue": q}, 201)
	b := c.enqueue(map[string]any{"kind": "bb.replay", "queue": q}, 201)
	body := map[string]any{"worker_id": "bb-w", "queues": []string{q}, "limit": 1, "request_id": "bb-claim-1"}
	first := c.claim(body)
	if len(first) != 1 || first[0].TaskID != a.ID {
		t.Fatalf("claim = %+v, want job %d", first, a.ID)
	}
	again := c.claim(body)
	if len(again) != 1 || again[0].TaskID != a.ID || again[0].Attempt != first[0].Attempt || again[0].LeaseToken != first[0].LeaseToken {
		t.Fatalf("repeated claim = %+v, want the first answer %+v", again, first)
	}
	if j := c.get(a.ID); j.Attempt != 1 || j.Executions != 1 || j.Status != "running" {
		t.Errorf("job %d after a repeated claim: %s attempt %d executions %d, want running, 1, 1", a.ID, j.Status, j.Attempt, j.Executions)
	}
	if j := c.get(b.ID); j.Status != "queued" {
		t.Errorf("job %d is %s after a repeated claim, want queued (a repeat claims nothing more)", b.ID, j.Status)
	}
	// Once the task is done, the repeat answers nothing: the worker holds it no more.
	c.want(200, "POST", "/internal/task-complete", with(fence(first[0]), "status", "succeeded", "output", 1), nil)
	if late := c.claim(body); len(late) != 0 {
		t.Errorf("repeated claim after the task completed = %+v, want none", late)
	}
	// A new request_id is a new claim.
	if next := c.claim(with(body, "request_id", "bb-claim-2")); len(next) != 1 || next[0].TaskID != b.ID {
		t.Errorf("claim with a new request_id = %+v, want job %d", next, b.ID)
	}
	c.wantError(400, "invalid_argument", "POST", "/internal/task-claim", with(body, "request_id", strings.Repeat("x", 201)))
}
