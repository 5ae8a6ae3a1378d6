package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
)

// encoding/json replaces a lone UTF-16 surrogate escape and each byte that is
// not UTF-8 with U+FFFD. In an identifier that merged keys the client sent as
// different: idempotency keys "order-\ud83d" and "order-\ud83c" (two emoji
// cut in half, as a key truncated by a JavaScript client is) were one key,
// so the second enqueue was answered 200 with the first's job and its own job
// was never enqueued; the library refuses such a key ("must be UTF-8 text").
// An identifier field (idempotency_key, request_id, worker_id) that is not
// exactly UTF-8 text as sent is refused with 400 naming it, and nothing is
// written; free text (error, stack) is still taken, cleaned.
func TestIdentifiersAreNotMergedByReplacement(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			ts := httptest.NewServer(s)
			defer ts.Close()
			post := func(path, body string) (int, []byte) {
				t.Helper()
				resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var b json.RawMessage
				_ = json.NewDecoder(resp.Body).Decode(&b)
				return resp.StatusCode, b
			}
			for _, pair := range [][2]string{
				{`"order-\ud83d"`, `"order-\ud83c"`}, // high surrogates alone
				{`"order-\udc00"`, `"order-\udfff"`}, // low surrogates alone
				{"\"order-\xff\"", "\"order-\xfe\""}, // bytes that are not UTF-8
			} {
				for _, key := range pair {
					code, body := post("/jobs", `{"kind":"k","idempotency_key":`+key+`}`)
					if code != http.StatusBadRequest || !strings.Contains(string(body), "idempotency_key") {
						t.Errorf("enqueue with idempotency_key %s: %d %s; want 400 naming idempotency_key", key, code, body)
					}
				}
			}
			if code, body := post("/jobs", `{"kind":"k","idempotency_key":"order-\ud83d\ude00"}`); code != http.StatusCreated {
				t.Errorf("enqueue with a whole surrogate pair in its key: %d %s; want 201", code, body)
			}
			code, body := post("/jobs", `{"kind":"k","run_at":"2030-01-01T00:00:00Z"}`)
			if code != http.StatusCreated {
				t.Fatalf("enqueue: %d %s", code, body)
			}
			if code, body := post("/jobs/2/cancel", `{"request_id":"c-\ud800"}`); code != http.StatusBadRequest || !strings.Contains(string(body), "request_id") {
				t.Errorf("cancel with request_id c-\\ud800: %d %s; want 400 naming request_id", code, body)
			}
			if code, body := post("/internal/task-claim", `{"worker_id":"w-\udfff","queues":["default"]}`); code != http.StatusBadRequest || !strings.Contains(string(body), "worker_id") {
				t.Errorf("claim with worker_id w-\\udfff: %d %s; want 400 naming worker_id", code, body)
			}
			// Nothing was written by the refused requests: two jobs.
			var list jobList
			resp, err := http.Get(ts.URL + "/jobs")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Jobs) != 2 || list.Jobs[0].Status != "queued" {
				t.Errorf("GET /jobs: %d jobs (%v), want 2, the last one queued", len(list.Jobs), err)
			}
		})
	}
}
