package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// POST /internal/task-cancels over loopback HTTP, on both drivers: a long
// poll answers the job a cancel named as soon as it is named (and not a
// claimed job that was not canceled); with no wait it answers none at once;
// the server's Close ends a waiting poll with none; bad input is refused
// naming the field.
func TestTaskCancelsLongPoll(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := newTestServerOn(t, kind, Config{})
			hs := httptest.NewServer(s)
			t.Cleanup(hs.Close)
			// send does one request; post fails the test on a transport
			// error (the test's goroutine only: a long poll runs in its own
			// and answers what send returned).
			send := func(path, body string) (int, []byte, error) {
				resp, err := http.Post(hs.URL+path, "application/json", strings.NewReader(body))
				if err != nil {
					return 0, nil, fmt.Errorf("POST %s: %w", path, err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				return resp.StatusCode, b, err
			}
			post := func(path, body string) (int, []byte) {
				t.Helper()
				code, b, err := send(path, body)
				if err != nil {
					t.Fatal(err)
				}
				return code, b
			}
			answer := make(chan []byte, 1)
			longPoll := func(body string) {
				_, b, err := send("/internal/task-cancels", body)
				if err != nil {
					b = []byte(err.Error())
				}
				answer <- b
			}
			ids := func(b []byte) []int64 {
				t.Helper()
				var ans struct {
					TaskIDs *[]int64 `json:"task_ids"`
				}
				if err := json.Unmarshal(b, &ans); err != nil || ans.TaskIDs == nil {
					t.Fatalf("answer %s: want {\"task_ids\": [...]} (%v)", b, err)
				}
				return *ans.TaskIDs
			}

			for _, bad := range []struct{ body, field string }{
				{`{"wait_seconds":-1}`, "wait_seconds"},
				{`{"wait_seconds":"5"}`, "wait_seconds"},
				{`{"task_id":1}`, "task_id"},
			} {
				code, b := post("/internal/task-cancels", bad.body)
				if code != http.StatusBadRequest || !bytes.Contains(b, []byte(bad.field)) {
					t.Errorf("task-cancels %s: %d %s, want 400 naming %s", bad.body, code, b, bad.field)
				}
			}
			if code, b := post("/internal/task-cancels", `{}`); code != http.StatusOK || len(ids(b)) != 0 {
				t.Errorf("task-cancels without a wait: %d %s, want 200 and no ids at once", code, b)
			}

			// Two running jobs; the second is canceled.
			for range 2 {
				if code, b := post("/jobs", `{"kind":"k"}`); code != http.StatusCreated {
					t.Fatalf("POST /jobs: %d %s", code, b)
				}
			}
			code, b := post("/internal/task-claim", `{"worker_id":"w1","queues":["default"],"limit":2}`)
			var claimed claimAnswer
			if code != http.StatusOK || json.Unmarshal(b, &claimed) != nil || len(claimed.Tasks) != 2 {
				t.Fatalf("claim: %d %s, want two tasks", code, b)
			}
			kept, canceled := claimed.Tasks[0].TaskID, claimed.Tasks[1].TaskID
			go longPoll(`{"wait_seconds":30}`)
			// The poll may not be listening yet when the job is canceled: its
			// wake-up is then published again, as the same pointer, until
			// the poll answers (a pointer is best effort).
			if code, b := post(fmt.Sprintf("/jobs/%d/cancel", canceled), ``); code != http.StatusOK {
				t.Fatalf("cancel: %d %s", code, b)
			}
			again := time.NewTicker(100 * time.Millisecond)
			defer again.Stop()
			deadline := time.After(20 * time.Second)
			var got []int64
			for got == nil {
				select {
				case b := <-answer:
					got = ids(b)
				case <-again.C:
					if err := s.drv.WakeupPublish(context.Background(), []string{driver.CanceledWakeup(canceled)}); err != nil {
						t.Fatal(err)
					}
				case <-deadline:
					t.Fatalf("task-cancels did not answer the canceled job %d within 20s", canceled)
				}
			}
			if !slices.Equal(got, []int64{canceled}) {
				t.Errorf("task-cancels answered %v, want [%d] (not %d, claimed and not canceled)", got, canceled, kept)
			}

			// Close ends a waiting poll, with none.
			go longPoll(`{"wait_seconds":60}`)
			s.Close()
			select {
			case b := <-answer:
				if len(ids(b)) != 0 {
					t.Errorf("task-cancels ended by Close answered %s, want none", b)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("task-cancels still waiting 20s after the server's Close")
			}
		})
	}
}
