package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/testdb"
)

// A cancel may carry a request_id: repeated (its answer was lost), it answers
// the job again, where a plain repeat gets 422 for a job already canceled,
// which looks the same as a job someone else canceled. Endpoints that take no
// body refuse one with a field, rather than ignore it: a request_id sent to
// them was dropped without a word (helper-38 F4).
func TestOperatorCallsAndTheirBodies(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			for range 2 {
				if code, _, body := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k"}`)); code != http.StatusCreated {
					t.Fatalf("POST /jobs: %d %s", code, body)
				}
			}
			for i, want := range []int{http.StatusOK, http.StatusOK} {
				code, _, body := call(t, s, "POST", "/jobs/1/cancel", "", []byte(`{"request_id":"c-1"}`))
				if code != want || !strings.Contains(string(body), `"status":"canceled"`) {
					t.Errorf("cancel with request_id c-1, call %d: %d %s; want %d with the canceled job", i+1, code, body, want)
				}
			}
			if code, _, body := call(t, s, "POST", "/jobs/1/cancel", "", nil); code != http.StatusUnprocessableEntity {
				t.Errorf("cancel of a canceled job without a request_id: %d %s; want 422", code, body)
			}
			if code, _, body := call(t, s, "POST", "/jobs/2/cancel", "", []byte(`{"request_id":"c-1","reason":"x"}`)); code != http.StatusBadRequest ||
				!strings.Contains(string(body), "reason") {
				t.Errorf("cancel with an unknown field: %d %s; want 400 naming it", code, body)
			}
			for _, tc := range []struct{ method, path string }{
				{"POST", "/dlq/2/requeue"},
				{"DELETE", "/dlq"},
				{"POST", "/queues/default/pause"},
				{"POST", "/queues/default/resume"},
			} {
				code, _, body := call(t, s, tc.method, tc.path, "", []byte(`{"request_id":"x"}`))
				if code != http.StatusBadRequest || !strings.Contains(string(body), "request_id") {
					t.Errorf("%s %s with a body it does not take: %d %s; want 400 naming request_id", tc.method, tc.path, code, body)
				}
			}
			for _, body := range []string{"", "{}", " \n"} {
				if code, _, got := call(t, s, "POST", "/queues/default/pause", "", []byte(body)); code != http.StatusOK {
					t.Errorf("pause with body %q: %d %s; want 200", body, code, got)
				}
			}
			if code, _, body := call(t, s, "GET", fmt.Sprintf("/jobs/%d", 2), "", nil); code != http.StatusOK || !strings.Contains(string(body), `"status":"queued"`) {
				t.Errorf("job 2 after the refused calls: %d %s; want it queued", code, body)
			}
		})
	}
}

// enqueueAndClaim enqueues a job of kind k on s and claims it as worker w.
func enqueueAndClaim(t *testing.T, s *Server) Task {
	t.Helper()
	if code, _, body := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k"}`)); code != http.StatusCreated {
		t.Fatalf("POST /jobs: %d %s", code, body)
	}
	_, _, body := call(t, s, "POST", "/internal/task-claim", "", []byte(`{"worker_id":"w","queues":["default"]}`))
	var ans claimAnswer
	if json.Unmarshal(body, &ans) != nil || len(ans.Tasks) != 1 {
		t.Fatalf("claim: %s", body)
	}
	return ans.Tasks[0]
}

// retry_after_seconds goes with a retry only, and bounds its delay from below
// whatever the server's backoff (here none) says.
func TestRetryAfterSeconds(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{Backoff: func(int) time.Duration { return 0 }})
			task := enqueueAndClaim(t, s)
			report := func(extra string) (int, []byte) {
				code, _, b := call(t, s, "POST", "/internal/task-complete", "", []byte(fmt.Sprintf(
					`{"task_id":1,"attempt":1,"lease_token":%q,"error":"gave up"%s}`, task.LeaseToken, extra)))
				return code, b
			}
			for _, bad := range []string{
				`,"status":"failed","retry_after_seconds":5`,
				`,"status":"retry","retry_after_seconds":-1`,
				`,"status":"retry","retry_after_seconds":5,"snooze_seconds":1`,
			} {
				if code, b := report(bad); code != http.StatusBadRequest || !strings.Contains(string(b), "retry_after_seconds") {
					t.Errorf("report%s: %d %s; want 400 naming retry_after_seconds", bad, code, b)
				}
			}
			before := time.Now()
			code, b := report(`,"status":"retry","retry_after_seconds":60`)
			var j struct {
				Status string    `json:"status"`
				RunAt  time.Time `json:"run_at"`
			}
			if code != http.StatusOK || json.Unmarshal(b, &j) != nil || j.Status != "queued" || j.RunAt.Before(before.Add(59*time.Second)) {
				t.Errorf("retry with retry_after_seconds 60: %d %s; want queued a minute ahead", code, b)
			}
		})
	}
}

// A Config.Backoff that panics is the server's user code: a retry report is
// still taken, with DefaultBackoff's delay. The panic answered 500, and the
// remote worker then left its job to the lease's expiry.
func TestPanickingBackoffRetriesWithTheDefault(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{Backoff: func(int) time.Duration { panic("backoff bug") }})
			task := enqueueAndClaim(t, s)
			before := time.Now()
			code, _, b := call(t, s, "POST", "/internal/task-complete", "", []byte(fmt.Sprintf(
				`{"task_id":1,"attempt":1,"lease_token":%q,"status":"retry","error":"try again"}`, task.LeaseToken)))
			var j struct {
				Status string    `json:"status"`
				RunAt  time.Time `json:"run_at"`
			}
			if code != http.StatusOK || json.Unmarshal(b, &j) != nil || j.Status != "queued" || j.RunAt.Before(before) || j.RunAt.After(time.Now().Add(time.Second)) {
				t.Errorf("retry report under a panicking backoff: %d %s; want queued within DefaultBackoff's first second", code, b)
			}
		})
	}
}

// replay_only collects a claim: it answers what a claim of its request_id took
// and claims nothing new; it needs a request_id and answers at once.
func TestClaimReplayOnly(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			if code, _, body := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k"}`)); code != http.StatusCreated {
				t.Fatalf("POST /jobs: %d %s", code, body)
			}
			for body, field := range map[string]string{
				`{"worker_id":"w","queues":["default"],"replay_only":true}`:                                    "request_id",
				`{"worker_id":"w","queues":["default"],"replay_only":true,"request_id":"r1","wait_seconds":5}`: "wait_seconds",
			} {
				if code, _, b := call(t, s, "POST", "/internal/task-claim", "", []byte(body)); code != http.StatusBadRequest || !strings.Contains(string(b), field) {
					t.Errorf("claim %s: %d %s; want 400 naming %s", body, code, b, field)
				}
			}
			claim := func(body string) claimAnswer { return claimOK(t, s, body) }
			if ans := claim(`{"worker_id":"w","queues":["default"],"replay_only":true,"request_id":"r0"}`); len(ans.Tasks) != 0 {
				t.Errorf("replay_only of a request_id never claimed answered %+v; want no tasks (the job is ready)", ans)
			}
			if ans := claim(`{"worker_id":"w","queues":["default"],"request_id":"r0"}`); len(ans.Tasks) != 0 {
				t.Errorf("claim with a request_id collected before answered %+v; want no tasks (it is closed)", ans)
			}
			first := claim(`{"worker_id":"w","queues":["default"],"request_id":"r1"}`)
			again := claim(`{"worker_id":"w","queues":["default"],"replay_only":true,"request_id":"r1"}`)
			if len(first.Tasks) != 1 || len(again.Tasks) != 1 || again.Tasks[0].LeaseToken != first.Tasks[0].LeaseToken || !again.Replayed {
				t.Errorf("claim %+v, then replay_only %+v; want the same task, replayed", first, again)
			}
		})
	}
}

// claimOK sends a task-claim and returns its answer, failing t unless it is
// a 200 with a claim's answer.
func claimOK(t *testing.T, s *Server, body string) claimAnswer {
	t.Helper()
	code, _, b := call(t, s, "POST", "/internal/task-claim", "", []byte(body))
	var ans claimAnswer
	if code != http.StatusOK || json.Unmarshal(b, &ans) != nil {
		t.Fatalf("claim %s: %d %s", body, code, b)
	}
	return ans
}

// A succeeded report's output is bounded as args are (1 MiB by default), and
// refused with the same 413: a result is kept with its job, and the server
// took 2 MB (helper-47).
func TestOutputIsBounded(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			task := enqueueAndClaim(t, s)
			// A string over the limit, and 12 KB of numbers that PostgreSQL
			// keeps as 2 MB of digits (1e999 is a 1 and 999 zeros).
			for _, big := range []string{fmt.Sprintf(`"%s"`, strings.Repeat("x", 1<<20)), `[` + strings.Repeat("1e999,", 2000) + `0]`} {
				code, _, b := call(t, s, "POST", "/internal/task-complete", "", []byte(fmt.Sprintf(
					`{"task_id":%d,"attempt":1,"lease_token":%q,"status":"succeeded","output":%s}`, task.TaskID, task.LeaseToken, big)))
				if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "output") || !strings.Contains(string(b), CodePayloadTooLarge) {
					t.Errorf("report with a %d-byte output: %d %.200s; want 413 %s naming output", len(big), code, b, CodePayloadTooLarge)
				}
			}
		})
	}
}

// A claim names at most 100 queues: each is a statement of the claim, and
// ten thousand held a connection for a lease, then answered 503 (helper-47).
func TestClaimQueuesAreBounded(t *testing.T) {
	s := newTestServerOn(t, "sqlite", Config{})
	names := make([]string, 101)
	for i := range names {
		names[i] = fmt.Sprintf("q%d", i)
	}
	body, _ := json.Marshal(map[string]any{"worker_id": "w", "queues": names})
	if code, _, b := call(t, s, "POST", "/internal/task-claim", "", body); code != http.StatusBadRequest || !strings.Contains(string(b), "queues") {
		t.Errorf("claim of 101 queues: %d %s; want 400 naming queues", code, b)
	}
	body, _ = json.Marshal(map[string]any{"worker_id": "w", "queues": names[:100]})
	if code, _, b := call(t, s, "POST", "/internal/task-claim", "", body); code != http.StatusOK {
		t.Errorf("claim of 100 queues: %d %s; want 200", code, b)
	}
}

// Refusals say what is wrong in the caller's terms (helper-47): a string
// where a list goes was "want a string", a number beyond float64 was "want a
// number", and a name's 'é' was reported as its first byte, 'Ã'.
func TestRefusalsSayWhatIsWrong(t *testing.T) {
	s := newTestServerOn(t, "sqlite", Config{})
	for _, tc := range []struct{ path, body, want string }{
		{"/internal/task-claim", `{"worker_id":"w","queues":"q"}`, "want an array"},
		{"/internal/task-claim", `{"worker_id":"w","queues":["q"],"wait_seconds":1e309}`, "1e309 is out of range"},
		{"/internal/task-claim", `{"worker_id":"w","queues":["q"],"limit":99999999999999999999}`, "out of range"},
		{"/internal/task-claim", `{"worker_id":"w","queues":["q"],"limit":1.5}`, "want an integer"},
		{"/jobs", `{"kind":"k\u00e9"}`, `character 'é'`},
	} {
		if code, _, b := call(t, s, "POST", tc.path, "", []byte(tc.body)); code != http.StatusBadRequest || !strings.Contains(string(b), tc.want) {
			t.Errorf("POST %s %s: %d %s; want 400 saying %q", tc.path, tc.body, code, b, tc.want)
		}
	}
}

// A field sent twice is refused naming it: encoding/json took the last
// value, where a proxy or validator in front may read the first (helper-47).
func TestFieldSentTwiceIsRefused(t *testing.T) {
	s := newTestServerOn(t, "sqlite", Config{})
	for path, body := range map[string]string{
		"/jobs":                `{"kind":"k","kind":"j"}`,
		"/internal/task-claim": `{"worker_id":"w","queues":["q"],"worker_id":"x"}`,
	} {
		if code, _, b := call(t, s, "POST", path, "", []byte(body)); code != http.StatusBadRequest || !strings.Contains(string(b), "appears twice") {
			t.Errorf("POST %s %s: %d %s; want 400 saying the field appears twice", path, body, code, b)
		}
	}
	if code, _, b := call(t, s, "GET", "/jobs", "", nil); code != http.StatusOK || strings.Contains(string(b), `"kind"`) {
		t.Errorf("jobs after the refused enqueue: %d %s; want none", code, b)
	}
}

// A body of JSON null names no field: it is taken as an empty one, as before
// fields named twice were refused (helper-49 F3).
func TestNullBodyIsAnEmptyOne(t *testing.T) {
	s := newTestServerOn(t, "sqlite", Config{})
	if code, _, b := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k"}`)); code != http.StatusCreated {
		t.Fatalf("POST /jobs: %d %s", code, b)
	}
	if code, _, b := call(t, s, "POST", "/jobs/1/cancel", "", []byte(`null`)); code != http.StatusOK {
		t.Errorf("cancel with body null: %d %s; want 200", code, b)
	}
}

// A succeeded report under a stale fence is a 409 lease_lost that changes
// nothing, on every status a worker reports: the success's own checks once
// hid the store's answer, and the stale report was a 500.
func TestStaleReportIsRefused(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			task := enqueueAndClaim(t, s)
			for _, report := range []string{`"status":"succeeded","output":{"n":1e3}`, `"status":"retry","error":"e"`, `"status":"failed","error":"e"`} {
				code, _, b := call(t, s, "POST", "/internal/task-complete", "", []byte(fmt.Sprintf(
					`{"task_id":%d,"attempt":1,"lease_token":"00000000-0000-4000-8000-000000000000",%s}`, task.TaskID, report)))
				if code != http.StatusConflict || !strings.Contains(string(b), "lease_lost") {
					t.Errorf("report {%s} with another lease token: %d %.200s; want 409 lease_lost", report, code, b)
				}
			}
			code, _, b := call(t, s, "GET", fmt.Sprintf("/jobs/%d", task.TaskID), "", nil)
			if code != http.StatusOK || !strings.Contains(string(b), `"status":"running"`) {
				t.Errorf("the job after stale reports: %d %.300s; want it running as claimed", code, b)
			}
		})
	}
}

// A claim answered no tasks closes its request_id: a late copy of it (a
// proxy's resend) claims nothing for a worker that has moved on. It took the
// job that had come since, leased to nobody until the lease ran out.
func TestEmptyClaimClosesItsRequestID(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			claim := func(body string) claimAnswer { return claimOK(t, s, body) }
			if ans := claim(`{"worker_id":"w","queues":["default"],"request_id":"r1"}`); len(ans.Tasks) != 0 {
				t.Fatalf("claim of an empty queue answered %+v", ans)
			}
			if code, _, b := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k"}`)); code != http.StatusCreated {
				t.Fatalf("POST /jobs: %d %s", code, b)
			}
			if ans := claim(`{"worker_id":"w","queues":["default"],"request_id":"r1"}`); len(ans.Tasks) != 0 {
				t.Errorf("a copy of the claim answered no tasks claimed %+v; want none", ans)
			}
			if ans := claim(`{"worker_id":"w","queues":["default"],"request_id":"r2"}`); len(ans.Tasks) != 1 {
				t.Errorf("a new claim answered %+v; want the job", ans)
			}
		})
	}
}

// A success with a stack is refused naming it, as one with an error is: the
// stack was dropped without a word.
func TestSuccessWithAStackIsRefused(t *testing.T) {
	s := newTestServerOn(t, "sqlite", Config{})
	task := enqueueAndClaim(t, s)
	code, _, b := call(t, s, "POST", "/internal/task-complete", "", []byte(fmt.Sprintf(
		`{"task_id":%d,"attempt":1,"lease_token":%q,"status":"succeeded","stack":"at main.go:1"}`, task.TaskID, task.LeaseToken)))
	if code != http.StatusBadRequest || !strings.Contains(string(b), "stack") {
		t.Errorf("a success with a stack: %d %s; want 400 naming stack", code, b)
	}
}
