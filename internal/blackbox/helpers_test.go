package blackbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// job is the JSON of a job, as a client sees it.
type job struct {
	ID          int64           `json:"id"`
	Kind        string          `json:"kind"`
	Queue       string          `json:"queue"`
	Status      string          `json:"status"`
	Attempt     int             `json:"attempt"`
	Executions  int             `json:"executions"`
	MaxAttempts int             `json:"max_attempts"`
	Priority    int             `json:"priority"`
	RunAt       time.Time       `json:"run_at"`
	Args        json.RawMessage `json:"args"`
	Metadata    json.RawMessage `json:"metadata"`
	Result      json.RawMessage `json:"result"`
	Error       *string         `json:"error"`
	Errors      []struct {
		Attempt int    `json:"attempt"`
		Error   string `json:"error"`
	} `json:"errors"`
	TimeoutSeconds *float64   `json:"timeout_seconds"`
	CreatedAt      time.Time  `json:"created_at"`
	StartedAt      *time.Time `json:"started_at"`
	FinishedAt     *time.Time `json:"finished_at"`
	Rev            int64      `json:"rev"`
	RetryOf        *int64     `json:"retry_of"`
}

// task is one task of a task-claim answer.
type task struct {
	TaskID         int64           `json:"task_id"`
	Attempt        int             `json:"attempt"`
	LeaseToken     string          `json:"lease_token"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"`
	LeaseSeconds   float64         `json:"lease_seconds"`
	Kind           string          `json:"kind"`
	Args           json.RawMessage `json:"args"`
	TimeoutSeconds *float64        `json:"timeout_seconds"`
}

type heartbeatAnswer struct {
	LeaseExpiresAt  *time.Time `json:"lease_expires_at"`
	LeaseSeconds    *float64   `json:"lease_seconds"`
	CancelRequested bool       `json:"cancel_requested"`
}

type page struct {
	Jobs       []job   `json:"jobs"`
	NextCursor *string `json:"next_cursor"`
}

// jobFields are the fields every job in every answer has (issue 3).
var jobFields = []string{"id", "kind", "queue", "status", "attempt", "max_attempts", "priority", "run_at",
	"args", "result", "error", "errors", "created_at", "started_at", "finished_at", "rev"}

func (c *client) enqueue(body any, want int) job {
	c.t.Helper()
	var j job
	r := c.want(want, "POST", "/jobs", body, &j)
	checkJobFields(c.t, r.body)
	if loc := r.header.Get("Location"); loc != fmt.Sprintf("/jobs/%d", j.ID) {
		c.t.Errorf("POST /jobs: Location %q, want /jobs/%d", loc, j.ID)
	}
	return j
}

func (c *client) get(id int64) job {
	c.t.Helper()
	var j job
	r := c.want(200, "GET", fmt.Sprintf("/jobs/%d", id), nil, &j)
	checkJobFields(c.t, r.body)
	return j
}

// claim claims and answers the tasks; every answer, with tasks or without,
// has the same three fields.
func (c *client) claim(body any) []task {
	c.t.Helper()
	var res map[string]json.RawMessage
	c.want(200, "POST", "/internal/task-claim", body, &res)
	for _, k := range []string{"tasks", "claimed_after_seconds", "replayed"} {
		if _, ok := res[k]; !ok {
			c.t.Errorf("task-claim %v answered without %q: %v", body, k, res)
		}
	}
	var ts []task
	if err := json.Unmarshal(res["tasks"], &ts); err != nil {
		c.t.Fatalf("task-claim %v: tasks: %v", body, err)
	}
	return ts
}

// claimOne claims the one ready job of queue.
func (c *client) claimOne(queue string) task {
	c.t.Helper()
	ts := c.claim(map[string]any{"worker_id": "bb-" + queue, "queues": []string{queue}, "limit": 10})
	if len(ts) != 1 {
		c.t.Fatalf("claim from %s: %d tasks, want 1: %+v", queue, len(ts), ts)
	}
	return ts[0]
}

func fence(tk task) map[string]any {
	return map[string]any{"task_id": tk.TaskID, "attempt": tk.Attempt, "lease_token": tk.LeaseToken}
}

// with returns a copy of m with the key-value pairs kv set.
func with(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func checkJobFields(t *testing.T, body []byte) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("job is not a JSON object: %v: %s", err, body)
	}
	for _, f := range jobFields {
		if _, ok := m[f]; !ok {
			t.Errorf("job lacks field %q: %s", f, body)
		}
	}
	if _, ok := m["lease_token"]; ok {
		t.Errorf("job shows its lease token: %s", body)
	}
}

func jsonEq(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	_ = json.Unmarshal([]byte(want), &w)
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// same fails if the job changed between two reads.
func same(t *testing.T, what string, before, after job) {
	t.Helper()
	strOf := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	if before.Rev != after.Rev || before.Status != after.Status || before.Attempt != after.Attempt ||
		!bytes.Equal(before.Result, after.Result) || strOf(before.Error) != strOf(after.Error) {
		t.Errorf("%s changed the job: before rev %d %s attempt %d result %s error %s; after rev %d %s attempt %d result %s error %s",
			what, before.Rev, before.Status, before.Attempt, before.Result, strOf(before.Error),
			after.Rev, after.Status, after.Attempt, after.Result, strOf(after.Error))
	}
}

// wantStatus fails unless the answer has status want (and the error shape if ≥ 400).
func wantStatus(t *testing.T, c *client, want int, method, path string, body any) {
	t.Helper()
	r := c.do(method, path, body)
	if r.status != want {
		t.Errorf("%s %s %s: status %d, want %d: %.300s", method, path, shorten(body), r.status, want, r.body)
	}
	if r.status >= 400 {
		checkError(t, r)
	}
}

// noServerError fails if the answer is a 5xx or an error without the error shape.
func noServerError(t *testing.T, c *client, method, path string, body any) {
	t.Helper()
	r := c.do(method, path, body)
	if r.status >= 500 {
		t.Errorf("%s %s %s: status %d: %s", method, path, shorten(body), r.status, r.body)
		return
	}
	if r.status >= 400 {
		checkError(t, r)
	}
}

func shorten(body any) string {
	s := fmt.Sprintf("%q", fmt.Sprint(body))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
