package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	pathpkg "path"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fuzzTarget is one request shape the fuzzer may pick: a route, or a wrong method
// or path.
type fuzzTarget struct{ method, path string }

// FuzzRequestDecoding sends fuzzed bodies, path segments and tokens to every
// route of an in-process server over a real SQLite database, and checks that bad
// input never gets a 5xx or a panic, that every error is {"error": {"code",
// "message"}} and that every status is one the OpenAPI document lists.
//
// CI: go test -run '^$' -fuzz '^FuzzRequestDecoding$' -fuzztime 15000x ./server/
// (a count, not a duration: see golang/go#75804 and .ci/run)
// It runs over SQLite; DROVER_FUZZ_DRIVER=postgres runs it over PostgreSQL.
func FuzzRequestDecoding(f *testing.F) {
	kind := "sqlite"
	if k := os.Getenv("DROVER_FUZZ_DRIVER"); k != "" {
		kind = k
	}
	s := newTestServerOn(f, kind, Config{
		AdminToken: "admin", WorkerToken: "worker",
		MaxWait:      time.Millisecond, // long-polls must not slow the fuzzer
		MaxBodyBytes: 8 << 10,          // so 413 is reachable
	})
	targets := fuzzTargets(s)
	documented := documentedStatuses(f)

	// Some rows for the id routes to find: a queued job, a running task (whose
	// lease token the fuzzer cannot guess, so fenced calls are stale) and a
	// failed one for the DLQ.
	for _, body := range []string{`{"kind":"a"}`, `{"kind":"b","queue":"q"}`, `{"kind":"c","queue":"dead","max_attempts":1}`} {
		if st, _, b := call(f, s, "POST", "/jobs", "admin", []byte(body)); st != 201 {
			f.Fatalf("setup enqueue: %d %s", st, b)
		}
	}
	claim := func(queue string) Task {
		st, _, b := call(f, s, "POST", "/internal/task-claim", "worker", []byte(`{"worker_id":"w","queues":["`+queue+`"]}`))
		var res struct{ Tasks []Task }
		if err := json.Unmarshal(b, &res); st != 200 || err != nil || len(res.Tasks) != 1 {
			f.Fatalf("setup claim: %d %s", st, b)
		}
		return res.Tasks[0]
	}
	claim("q")
	dead := claim("dead")
	fail := `{"task_id":` + strconv.FormatInt(dead.TaskID, 10) + `,"attempt":1,"lease_token":"` + dead.LeaseToken + `","status":"failed","error":"boom"}`
	if st, _, b := call(f, s, "POST", "/internal/task-complete", "worker", []byte(fail)); st != 200 {
		f.Fatalf("setup fail: %d %s", st, b)
	}

	seeds := []struct {
		path string
		body string
	}{
		{"/jobs", `{"kind":"email.send","args":{"to":"a@example.com"},"queue":"default","priority":1,"run_at":"2030-01-01T09:00:00Z","max_attempts":3,"timeout_seconds":1.5,"idempotency_key":"k1","metadata":{"m":1}}`},
		{"/jobs", `{"kind":"k"}`},
		{"/jobs", `{"kind":""}`},
		{"/jobs", `{"kind":"k","args":[1,2]}`},
		{"/jobs", `{"kind":"k","args":"s"}`},
		{"/jobs", `{"kind":"k","args":{"a":"\u0000"}}`},
		{"/jobs", `{"kind":"k","priority":-1}`},
		{"/jobs", `{"kind":"k","priority":1e30}`},
		{"/jobs", `{"kind":"k","priority":2147483648}`},
		{"/jobs", `{"kind":"k","max_attempts":0}`},
		{"/jobs", `{"kind":"k","timeout_seconds":-1}`},
		{"/jobs", `{"kind":"k","timeout_seconds":1e-12}`},
		{"/jobs", `{"kind":"k","run_at":"yesterday"}`},
		{"/jobs", `{"kind":"k","run_at":"0001-01-01T00:00:00Z"}`},
		{"/jobs", `{"kind":"k","idempotency_key":""}`},
		{"/jobs", `{"kind":"k","metadata":[]}`},
		{"/jobs", `{"kind":"k","queue":"a b"}`},
		{"/jobs", `{"kind":"k","extra":true}`},
		{"/jobs", `{"kind":"k"} {"kind":"k"}`},
		{"/jobs", `{"kind":`},
		{"/jobs", `[]`},
		{"/jobs", `null`},
		{"/jobs", ``},
		{"/jobs", "{\"kind\":\"k\",\"args\":{\"a\":\"" + strings.Repeat("x", 9<<10) + "\"}}"},
		{"/internal/task-claim", `{"worker_id":"w1","queues":["default"],"limit":10,"wait_seconds":0}`},
		{"/internal/task-claim", `{"worker_id":"w1","task_id":1}`},
		{"/internal/task-claim", `{"worker_id":"w1","queues":["default"],"wait_seconds":0.001}`},
		{"/internal/task-claim", `{"worker_id":"","queues":["default"]}`},
		{"/internal/task-claim", `{"worker_id":"w1","queues":[]}`},
		{"/internal/task-claim", `{"worker_id":"w1","queues":["bad queue"]}`},
		{"/internal/task-claim", `{"worker_id":"w1","queues":["default"],"limit":0}`},
		{"/internal/task-claim", `{"worker_id":"w1","queues":["default"],"wait_seconds":-1}`},
		{"/internal/task-claim", `{"worker_id":"w1","queues":["default"],"wait_seconds":1e400}`},
		{"/internal/task-claim", `{"worker_id":"w\u0000","queues":["default"]}`},
		{"/internal/task-claim", `{"worker_id":1}`},
		{"/internal/heartbeat", `{"task_id":2,"attempt":1,"lease_token":"00000000-0000-0000-0000-000000000000"}`},
		{"/internal/heartbeat", `{"task_id":2,"attempt":1,"lease_token":"x"}`},
		{"/internal/heartbeat", `{"task_id":2,"attempt":2147483648,"lease_token":"00000000-0000-0000-0000-000000000000"}`},
		{"/internal/heartbeat", `{"task_id":0,"attempt":1,"lease_token":"x"}`},
		{"/internal/heartbeat", `{"task_id":2,"attempt":1}`},
		{"/internal/heartbeat", `{"task_id":"2"}`},
		{"/internal/task-complete", `{"task_id":2,"attempt":1,"lease_token":"00000000-0000-0000-0000-000000000000","status":"succeeded","output":{"ok":true},"request_id":"r1"}`},
		{"/internal/task-complete", `{"task_id":2,"attempt":1,"lease_token":"x","status":"failed","error":"boom","stack":"s"}`},
		{"/internal/task-complete", `{"task_id":2,"attempt":1,"lease_token":"x","status":"retry","error":"boom","snooze_seconds":5}`},
		{"/internal/task-complete", `{"task_id":2,"attempt":1,"lease_token":"x","status":"retry"}`},
		{"/internal/task-complete", `{"task_id":2,"attempt":1,"lease_token":"x","status":"succeeded","error":"e"}`},
		{"/internal/task-complete", `{"task_id":2,"attempt":1,"lease_token":"x","status":"failed","error":"e","output":1}`},
		{"/internal/task-complete", `{"task_id":2,"attempt":1,"lease_token":"x","status":"done"}`},
		{"/internal/task-complete", `{"task_id":2,"attempt":1,"lease_token":"00000000-0000-0000-0000-000000000000","status":"failed","error":"a\u0000b","request_id":"r\u0000"}`},
		{"/internal/task-complete", `{"task_id":2,"attempt":1,"lease_token":"x","status":"succeeded","request_id":"` + strings.Repeat("r", 201) + `"}`},
	}
	index := map[fuzzTarget]int{}
	for i, tg := range targets {
		index[tg] = i
	}
	for _, sd := range seeds {
		for _, auth := range []uint8{0, 1} {
			f.Add(uint8(index[fuzzTarget{"POST", sd.path}]), auth, "", []byte(sd.body))
		}
	}
	for i, tg := range targets {
		segs := []string{"1", "2", "3", "0", "-1", "abc", "99999999999999999999", "a b", "default", "/", "a/b", ".."}
		if tg.path == "/jobs" || tg.path == "/dlq" {
			segs = []string{"status=queued,running&queue=default&kind=k&limit=5&cursor=3", "status=failed", "status=bogus",
				"limit=0", "limit=1001", "cursor=x", "queue=a%20b", "kind=" + strings.Repeat("k", 129)}
		}
		for _, seg := range segs {
			if strings.Contains(tg.path, "{") || seg == "1" || strings.Contains(seg, "=") {
				f.Add(uint8(i), uint8(0), seg, []byte(nil))
			}
		}
		f.Add(uint8(i), uint8(2), "1", []byte(`{}`)) // no token
		// A body over MaxBodyBytes on every route: a handler that reads an
		// optional body answers 413, which its operation must document.
		f.Add(uint8(i), uint8(0), "1", []byte(`{"a":"`+strings.Repeat("x", 9<<10)+`"}`))
		f.Add(uint8(i), uint8(3), "1", []byte(`{}`)) // wrong token
	}

	f.Fuzz(func(t *testing.T, pick, auth uint8, seg string, body []byte) {
		tg := targets[int(pick)%len(targets)]
		if seg == "" {
			seg = "1"
		}
		path := strings.NewReplacer("{id}", url.PathEscape(seg), "{name}", url.PathEscape(seg)).Replace(tg.path)
		if tg.method != "POST" && (tg.path == "/jobs" || tg.path == "/dlq") {
			path += "?" + seg // the list filters
		}
		req, err := http.NewRequest(tg.method, "http://drover.test"+path, bytes.NewReader(body))
		if err != nil {
			t.Skip(err)
		}
		switch auth % 4 {
		case 0:
			req.Header.Set("Authorization", "Bearer admin")
		case 1:
			req.Header.Set("Authorization", "Bearer worker")
		case 3:
			req.Header.Set("Authorization", "Bearer "+seg)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		status, b := rec.Code, rec.Body.Bytes()

		if status >= 300 && status < 400 {
			// The standard mux redirects a path with . or .. segments or // to its
			// clean form; nothing else may redirect.
			if loc := rec.Header().Get("Location"); loc == "" || pathpkg.Clean(req.URL.Path) == req.URL.Path {
				t.Fatalf("%s %s: unexpected redirect %d to %q", tg.method, path, status, loc)
			}
			return
		}
		if status >= 500 {
			t.Fatalf("%s %s %q: status %d: %s", tg.method, path, body, status, b)
		}
		if want, ok := documented[tg]; ok && !want[status] {
			t.Errorf("%s %s %q: status %d is not in openapi.json for %s %s: %s", tg.method, path, body, status, tg.method, tg.path, b)
		}
		if status >= 400 {
			checkErrorBody(t, status, rec.Header(), b)
		} else if tg.path != "/metrics" && !json.Valid(b) {
			t.Fatalf("%s %s %q: status %d with invalid JSON: %s", tg.method, path, body, status, b)
		}
	})
}

// fuzzTargets is every route, then a wrong method, an unknown path and a path
// with the wrong shape.
func fuzzTargets(s *Server) []fuzzTarget {
	var out []fuzzTarget
	for _, r := range s.Routes() {
		out = append(out, fuzzTarget{r.Method, r.Path})
	}
	return append(out, fuzzTarget{"PUT", "/jobs"}, fuzzTarget{"DELETE", "/jobs/{id}"},
		fuzzTarget{"GET", "/nope/{id}"}, fuzzTarget{"POST", "/jobs/{id}/{name}"})
}

// documentedStatuses maps each operation of openapi.json to its statuses.
func documentedStatuses(tb testing.TB) map[fuzzTarget]map[int]bool {
	var d oaDoc
	if err := json.Unmarshal(OpenAPI(), &d); err != nil {
		tb.Fatal(err)
	}
	out := map[fuzzTarget]map[int]bool{}
	for path, item := range d.Paths {
		for m, op := range item {
			set := map[int]bool{}
			for code := range op.Responses {
				n, _ := strconv.Atoi(code)
				set[n] = true
			}
			out[fuzzTarget{strings.ToUpper(m), path}] = set
		}
	}
	return out
}
