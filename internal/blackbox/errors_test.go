package blackbox

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func testErrors(t *testing.T, s *server) {
	c := s.client(t, "")
	fields := []struct {
		method, path string
		body         any
		field        string
	}{
		{"POST", "/jobs", `{"args":{}}`, "kind"},
		{"POST", "/jobs", `{"kind":7}`, "kind"},
		{"POST", "/jobs", `{"kind":"bad kind"}`, "kind"},
		{"POST", "/jobs", `{"kind":"k","queue":"a/b"}`, "queue"},
		{"POST", "/jobs", `{"kind":"k","priority":-1}`, "priority"},
		{"POST", "/jobs", `{"kind":"k","priority":"high"}`, "priority"},
		{"POST", "/jobs", `{"kind":"k","max_attempts":0}`, "max_attempts"},
		{"POST", "/jobs", `{"kind":"k","run_at":"tomorrow"}`, "run_at"},
		{"POST", "/jobs", `{"kind":"k","timeout_seconds":-5}`, "timeout_seconds"},
		{"POST", "/jobs", `{"kind":"k","args":[1]}`, "args"},
		{"POST", "/jobs", `{"kind":"k","metadata":"m"}`, "metadata"},
		{"POST", "/jobs", `{"kind":"k","idempotency_key":""}`, "idempotency_key"},
		{"POST", "/jobs", `{"kind":"k","colour":"red"}`, "colour"},
		{"POST", "/internal/task-claim", `{"queues":["default"]}`, "worker_id"},
		{"POST", "/internal/task-claim", `{"worker_id":"w"}`, "queues"},
		{"POST", "/internal/task-claim", `{"worker_id":"w","queues":["default"],"limit":1000}`, "limit"},
		{"POST", "/internal/task-claim", `{"worker_id":"w","queues":["default"],"wait_seconds":-1}`, "wait_seconds"},
		{"POST", "/internal/heartbeat", `{"task_id":1,"attempt":1}`, "lease_token"},
		{"POST", "/internal/heartbeat", `{"attempt":1,"lease_token":"x"}`, "task_id"},
		{"POST", "/internal/task-complete", `{"task_id":1,"attempt":1,"lease_token":"x","status":"done"}`, "status"},
		{"POST", "/internal/task-complete", `{"task_id":1,"attempt":1,"lease_token":"x","status":"failed"}`, "error"},
		{"GET", "/jobs?status=nope", nil, "status"},
		{"GET", "/jobs?limit=0", nil, "limit"},
		{"GET", "/jobs?cursor=abc", nil, "cursor"},
		{"GET", "/dlq?status=queued", nil, "status"},
		{"GET", "/jobs?queue=a&queue=b", nil, "queue"},
		{"GET", "/jobs?limit=5&limit=10", nil, "limit"},
		{"DELETE", "/dlq?queue=&queue=a", nil, "queue"},
		{"DELETE", "/dlq?queu=a", nil, "queu"},
		{"DELETE", "/dlq?queue=a%zz", nil, "query"},
		{"DELETE", "/dlq?queue=a;b", nil, "query"},
		{"DELETE", "/dlq?queue=", nil, "queue"},
		{"GET", "/jobs?status=failed%zz", nil, "query"},
		{"GET", "/jobs?stauts=failed", nil, "stauts"},
		{"GET", "/dlq?queues=a", nil, "queues"},
		{"GET", "/jobs/abc", nil, "id"},
		{"POST", "/queues/bad%20name/pause", nil, "queue"},
	}
	for _, f := range fields {
		msg := c.wantError(400, "invalid_argument", f.method, f.path, f.body)
		if !strings.Contains(msg, f.field) {
			t.Errorf("%s %s %v: message %q does not name %q", f.method, f.path, f.body, msg, f.field)
		}
	}
	for _, p := range []string{"/jobs/+1", "/jobs/%2B1/events", "/jobs?cursor=%2B1", "/jobs?limit=%2B5", "/dlq?cursor=%2B1"} {
		c.wantError(400, "invalid_argument", "GET", p, nil)
	}
	for _, p := range []string{"/jobs/999999999", "/jobs/999999999/events"} {
		c.wantError(404, "not_found", "GET", p, nil)
	}
	c.wantError(404, "not_found", "POST", "/jobs/999999999/cancel", nil)
	c.wantError(404, "not_found", "POST", "/dlq/999999999/requeue", nil)
	c.wantError(404, "not_found", "POST", "/internal/heartbeat", `{"task_id":999999999,"attempt":1,"lease_token":"x"}`)
	c.wantError(404, "not_found", "GET", "/no/such/endpoint", nil)
	// The DLQ's list names only the parameters it takes: status is refused there.
	if msg := c.wantError(400, "invalid_argument", "GET", "/dlq?bogus=1", nil); !strings.Contains(msg, "queue, kind, limit, cursor") || strings.Contains(msg, "status") {
		t.Errorf("GET /dlq?bogus=1: message %q, want the parameters it takes (queue, kind, limit, cursor) and not status", msg)
	}
	for _, m := range []struct{ method, path string }{
		{"DELETE", "/jobs/1"}, {"GET", "/internal/task-claim"}, {"PUT", "/queues"}, {"PATCH", "/jobs"},
	} {
		c.wantError(405, "method_not_allowed", m.method, m.path, nil)
		if r := c.do(m.method, m.path, nil); r.header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", m.method, m.path)
		}
	}
	// 413: a body over the limit, and args over the payload limit in a body under it.
	huge := `{"kind":"k","args":{"a":"` + strings.Repeat("x", 3<<20) + `"}}`
	c.wantError(413, "payload_too_large", "POST", "/jobs", huge)
	big := `{"kind":"k","args":{"a":"` + strings.Repeat("x", 1<<20+10) + `"}}`
	c.wantError(413, "payload_too_large", "POST", "/jobs", big)
	c.wantError(413, "payload_too_large", "POST", "/internal/task-complete",
		`{"task_id":1,"attempt":1,"lease_token":"x","status":"succeeded","output":"`+strings.Repeat("x", 3<<20)+`"}`)
	// 422: cancel of a finished job, which stays as it was.
	q := "bb-errors"
	j := c.enqueue(map[string]any{"kind": "bb.done", "queue": q}, 201)
	tk := c.claimOne(q)
	// An output over the payload limit in a body under the body's: 413 as
	// args are, and the job is still running.
	running := c.get(j.ID)
	c.wantError(413, "payload_too_large", "POST", "/internal/task-complete",
		with(fence(tk), "status", "succeeded", "output", map[string]string{"a": strings.Repeat("x", 1<<20+10)}))
	same(t, "a completion with an output over the limit", running, c.get(j.ID))
	c.want(200, "POST", "/internal/task-complete", with(fence(tk), "status", "succeeded"), nil)
	before := c.get(j.ID)
	c.wantError(422, "invalid_transition", "POST", fmt.Sprintf("/jobs/%d/cancel", j.ID), nil)
	same(t, "cancel of a succeeded job", before, c.get(j.ID))
	// A purge whose filter is misspelt is refused, not taken as "every queue".
	dead := c.enqueue(map[string]any{"kind": "bb.dead", "queue": q, "max_attempts": 1}, 201)
	tk = c.claimOne(q)
	c.want(200, "POST", "/internal/task-complete", with(fence(tk), "status", "failed", "error", "boom"), nil)
	c.wantError(400, "invalid_argument", "DELETE", "/dlq?queu="+q, nil)
	var dlq page
	c.want(200, "GET", "/dlq?queue="+q, nil, &dlq)
	if len(dlq.Jobs) != 1 || dlq.Jobs[0].ID != dead.ID {
		t.Errorf("after a refused purge the DLQ of %s holds %+v, want job %d", q, dlq.Jobs, dead.ID)
	}
}

// testBadInput sends hostile input, including values the two databases store
// differently (32-bit columns, NUL characters, lone surrogates, huge numbers, deep
// JSON), with valid fences too so that they reach the database. None may give a
// 5xx, and both drivers must answer alike.
func testBadInput(t *testing.T, s *server) {
	c := s.client(t, "")
	q := "bb-bad"
	deep := strings.Repeat("[", 9000) + strings.Repeat("]", 9000)
	enq := func(fields string) string { return `{"kind":"k","queue":"` + q + `",` + fields + `}` }
	enqueues := []struct {
		body string
		want int
	}{
		{enq(`"priority":2147483647`), 201},
		{enq(`"priority":2147483648`), 400},
		{enq(`"priority":4294967301`), 400},
		{enq(`"priority":9223372036854775807`), 400},
		{enq(`"priority":1e30`), 400},
		{enq(`"max_attempts":2147483648`), 400},
		{enq(`"timeout_seconds":1e-9`), 400},
		{enq(`"timeout_seconds":1e300`), 400},
		{enq(`"timeout_seconds":0.0015`), 400},
		{enq(`"timeout_seconds":0.3`), 201},
		{enq(`"run_at":"0001-01-01T00:00:00Z"`), 400},
		{enq(`"args":{"a":1,"b":{"c":1,"c":2}}`), 400},
		{enq(`"metadata":{"a":1,"\u0061":2}`), 400},
		{enq(`"args":{"a":{"x":1},"b":{"x":1}}`), 201},
		{enq(`"run_at":"9999-12-31T23:59:59Z"`), 201},
		{enq(`"run_at":"10000-01-01T00:00:00Z"`), 400},
		{enq(`"run_at":"1969-12-31T23:59:59Z"`), 400},
		{enq(`"run_at":"2030-01-01T00:00:00+25:00"`), 400},
		{enq(`"args":{"a":"\u0000"}`), 400},
		{enq(`"args":{"\u0000":1}`), 400},
		{enq(`"args":{"n":1e999999}`), 400},
		{enq(`"args":{"n":1e-20000}`), 400},
		{enq(`"args":{"n":0.` + strings.Repeat("0", 20000) + `}`), 400},
		{enq(`"args":{"n":1e400,"m":-1.5e-300,"big":123456789012345678901234567890}`), 201},
		{enq(`"args":{"d":` + deep + `}`), 201},
		{enq(`"metadata":{"a":"\u0000"}`), 400},
		{enq(`"metadata":{"s":"\udc00"}`), 400},
		{enq(`"idempotency_key":"a\u0000b"`), 400},
		{enq(`"idempotency_key":"` + strings.Repeat("i", 100000) + `"`), 400},
		{enq(`"args":{"s":"\ud800"}`), 400},
		{enq(`"args":{"s":"\ud800x"}`), 400},
		{enq(`"args":{"s":"\\ud800","pair":"\ud83d\ude00","e":"\u00e9"}`), 201},
		{enq("\"args\":{\"s\":\"\xff\xfe\"}"), 400},
		{`{"kind":"k","queue":"` + q + `"`, 400},
		{`{"kind":"k","queue":"` + q + `"}garbage`, 400},
		{"\x00\x01\x02", 400},
	}
	for _, e := range enqueues {
		wantStatus(t, c, e.want, "POST", "/jobs", e.body)
	}
	claims := []struct {
		body string
		want int
	}{
		{`{"worker_id":"w\u0000","queues":["` + q + `-none"]}`, 400},
		{`{"worker_id":"` + strings.Repeat("w", 201) + `","queues":["` + q + `"]}`, 400},
		{`{"worker_id":"w","task_id":9223372036854775807}`, 200},
		{`{"worker_id":"w","task_id":-1}`, 400},
		{`{"worker_id":"w","queues":["` + q + `-none"],"wait_seconds":1e-300}`, 200},
		{`{"worker_id":"w","queues":["` + q + `"],"limit":2147483648}`, 400},
		{`{"worker_id":"w","queues":["` + strings.Repeat("q", 129) + `"]}`, 400},
	}
	for _, e := range claims {
		wantStatus(t, c, e.want, "POST", "/internal/task-claim", e.body)
	}
	for _, p := range []string{"/jobs/9223372036854775807", "/jobs/9223372036854775808", "/jobs/-1", "/jobs/0",
		"/jobs?cursor=9223372036854775807", "/jobs?limit=99999999999999999999", "/jobs?queue=%00", "/jobs?kind=%ff",
		"/dlq?cursor=-5", "/jobs/1%00/events"} {
		noServerError(t, c, "GET", p, nil)
	}
	for _, p := range []string{"/queues/%00/pause", "/queues/" + strings.Repeat("q", 200) + "/resume",
		"/jobs/9223372036854775807/cancel", "/dlq/9223372036854775807/requeue"} {
		noServerError(t, c, "POST", p, nil)
	}

	// Reports on a real lease, so that the values reach the database.
	reports := []struct {
		fields map[string]any
		want   int
		status string // of the job after the report
	}{
		{map[string]any{"status": "failed", "error": "a\x00b"}, 200, "failed"},
		{map[string]any{"status": "retry", "error": "e", "stack": "s\x00"}, 200, "queued"},
		{map[string]any{"status": "succeeded", "output": map[string]any{"a": "\x00"}}, 400, "running"},
		{map[string]any{"status": "succeeded", "output": json.RawMessage(`{"n":1e999999}`)}, 400, "running"},
		{map[string]any{"status": "succeeded", "output": json.RawMessage(`"\udfff"`)}, 400, "running"},
		{map[string]any{"status": "succeeded", "output": json.RawMessage(`{"d":` + deep + `}`)}, 200, "succeeded"},
		{map[string]any{"status": "succeeded", "output": "ok", "request_id": "r\x00"}, 400, "running"},
		{map[string]any{"status": "retry", "error": "e", "snooze_seconds": 1e300}, 400, "running"},
		{map[string]any{"status": "succeeded", "attempt": int64(2147483648)}, 400, "running"},
		{map[string]any{"status": "succeeded", "attempt": int64(9223372036854775807)}, 400, "running"},
	}
	for i, rep := range reports {
		j := c.enqueue(map[string]any{"kind": "k", "queue": fmt.Sprintf("%s-%d", q, i)}, 201)
		tk := c.claimOne(j.Queue)
		body := fence(tk)
		for k, v := range rep.fields {
			body[k] = v
		}
		wantStatus(t, c, rep.want, "POST", "/internal/task-complete", body)
		if a := rep.fields["attempt"]; a != nil {
			wantStatus(t, c, 400, "POST", "/internal/heartbeat", with(fence(tk), "attempt", a))
		}
		got := c.get(j.ID)
		if got.Status != rep.status {
			t.Errorf("report %q: job is %s, want %s", rep.fields, got.Status, rep.status)
		}
		if e, ok := rep.fields["error"].(string); ok && rep.want == 200 {
			if want := strings.ReplaceAll(e, "\x00", "\uFFFD"); len(got.Errors) != 1 || got.Errors[0].Error != want {
				t.Errorf("report error %q: history %+v, want %q (NUL replaced)", e, got.Errors, want)
			}
		}
	}
}

func testAuth(t *testing.T, kind string) {
	const admin, worker = "bb-admin-token", "bb-worker-token"
	s := startServer(t, kind, "--admin-token", admin, "--worker-token", worker)
	anon, adm, wrk, wrong := s.client(t, ""), s.client(t, admin), s.client(t, worker), s.client(t, "nope")
	q := "bb-auth"
	claim := map[string]any{"worker_id": "bb-w", "queues": []string{q}}

	// Refused: no token or an unknown one is 401 everywhere but /healthz.
	for _, c := range []*client{anon, wrong} {
		c.wantError(401, "unauthorized", "GET", "/jobs", nil)
		c.wantError(401, "unauthorized", "POST", "/jobs", `{"kind":"k"}`)
		c.wantError(401, "unauthorized", "POST", "/internal/task-claim", claim)
		c.wantError(401, "unauthorized", "POST", "/internal/heartbeat", `{}`)
		c.wantError(401, "unauthorized", "GET", "/metrics", nil)
	}
	req, _ := http.NewRequest("GET", s.base+"/jobs", nil)
	req.SetBasicAuth("admin", admin)
	r := anon.send(req)
	if checkError(t, r); r.status != 401 {
		t.Errorf("Basic auth with the admin token as password: status %d, want 401", r.status)
	}
	// The worker token is 403 outside /internal/*.
	for _, p := range []struct{ method, path string }{
		{"GET", "/jobs"}, {"POST", "/jobs"}, {"GET", "/jobs/1"}, {"POST", "/jobs/1/cancel"}, {"GET", "/dlq"},
		{"POST", "/dlq/1/requeue"}, {"GET", "/queues"}, {"POST", "/queues/" + q + "/pause"}, {"GET", "/metrics"},
	} {
		wrk.wantError(403, "forbidden", p.method, p.path, `{"kind":"k"}`)
	}

	// Accepted.
	for _, c := range []*client{anon, wrong, wrk, adm} {
		var h map[string]any
		c.want(200, "GET", "/healthz", nil, &h)
		if h["database"] != "ok" {
			t.Errorf("GET /healthz = %v, want database ok", h)
		}
		c.want(200, "GET", "/openapi.json", nil, nil)
	}
	j := adm.enqueue(map[string]any{"kind": "bb.auth", "queue": q}, 201)
	adm.want(200, "GET", "/jobs", nil, nil)
	adm.want(200, "GET", "/dlq", nil, nil)
	adm.want(200, "GET", "/queues", nil, nil)
	adm.want(200, "GET", fmt.Sprintf("/jobs/%d", j.ID), nil, nil)
	adm.want(200, "GET", fmt.Sprintf("/jobs/%d/events", j.ID), nil, nil)
	tk := wrk.claimOne(q)
	if tk.TaskID != j.ID {
		t.Fatalf("worker token claimed %d, want %d", tk.TaskID, j.ID)
	}
	wrk.want(200, "POST", "/internal/heartbeat", fence(tk), nil)
	adm.want(200, "POST", "/internal/heartbeat", fence(tk), nil)
	wrk.want(200, "POST", "/internal/task-complete", with(fence(tk), "status", "succeeded"), nil)
	if ts := adm.claim(claim); len(ts) != 0 {
		t.Errorf("admin claim: %+v, want none left", ts)
	}
	adm.want(200, "POST", "/queues/"+q+"/pause", nil, nil)
	adm.want(200, "POST", "/queues/"+q+"/resume", nil, nil)

	// Metrics, with the admin token.
	m := adm.want(200, "GET", "/metrics", nil, nil)
	text := string(m.body)
	for _, want := range []string{"drover_jobs{", "drover_claims_total", `drover_claims_total{queue="` + q + `"} 1`} {
		if !strings.Contains(text, want) {
			t.Errorf("GET /metrics lacks %q", want)
		}
	}
}
