package drover_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover"
)

// A claim answer whose task carries no fence (task_id or attempt below 1, an
// empty lease_token: a proxy's stub, a broken server) is no answer the worker
// can run: every report of it would be refused, and the task the server did
// claim sat leased to nobody. The worker takes it as undecodable and resends
// the claim with the same request_id, which the server answers with the task
// it claimed, fenced. Before, the handler ran the fenceless task (a job 0, an
// attempt 0, or a lease no report could name), and the real one waited for
// its lease.
func TestRemoteWorkerRefusesAClaimedTaskWithoutAFence(t *testing.T) {
	for name, strip := range map[string]func(task map[string]any){
		"task_id":     func(task map[string]any) { task["task_id"] = 0 },
		"attempt":     func(task map[string]any) { delete(task, "attempt") },
		"lease_token": func(task map[string]any) { task["lease_token"] = "" },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, "sqlite", nil)
			var (
				stripped atomic.Bool
				mu       sync.Mutex
				ids      []string // request_id of each claim, in order
			)
			hs := wrappedServer(t, c, func(s http.Handler, w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/internal/task-claim" {
					s.ServeHTTP(w, r)
					return
				}
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				var req struct {
					RequestID string `json:"request_id"`
				}
				_ = json.Unmarshal(body, &req)
				mu.Lock()
				ids = append(ids, req.RequestID)
				mu.Unlock()
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, r)
				var answer map[string]any
				if rec.Code == http.StatusOK && json.Unmarshal(rec.Body.Bytes(), &answer) == nil {
					if tasks, _ := answer["tasks"].([]any); len(tasks) > 0 && stripped.CompareAndSwap(false, true) {
						strip(tasks[0].(map[string]any))
						b, _ := json.Marshal(answer)
						rec.Body = bytes.NewBuffer(b)
					}
				}
				writeRecorded(w, rec)
			})
			ws := drover.NewWorkers()
			ran := make(chan drover.Job, 8)
			drover.Register(ws, "pay", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
				ran <- *job
				return "paid", nil
			})
			id := enqueue(t, c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
			startRemoteWorker(t, drover.RemoteConfig{URL: hs.URL, WaitSeconds: 1}, fastWorkerConfig(ws))
			got := waitChan(t, ran, "the handler's first run")
			if got.ID != id || got.Attempt != 1 || got.LeaseToken == "" {
				t.Fatalf("the handler ran job %d at attempt %d, lease_token %q; want job %d at attempt 1 with its lease_token",
					got.ID, got.Attempt, got.LeaseToken, id)
			}
			if j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed); j.Status != drover.StatusSucceeded || j.Executions != 1 {
				t.Errorf("%s; want succeeded, run once", describe(j))
			}
			mu.Lock()
			defer mu.Unlock()
			if len(ids) < 2 || ids[0] == "" || ids[0] != ids[1] {
				t.Errorf("claims' request_ids %q: want the one answered without a fence sent again", ids)
			}
		})
	}
}

// A claim answer with no tasks at all ({} or "tasks": null, where a server
// answers [] for none: a gateway's or a proxy's stub) is a failed claim,
// logged as one, not an empty queue. The worker read it as "nothing to do"
// and idled without a word while its jobs waited.
func TestRemoteWorkerRefusesAClaimAnswerWithoutTasks(t *testing.T) {
	for name, stub := range map[string]string{"no tasks": `{}`, "tasks null": `{"tasks":null,"claimed_after_seconds":0,"replayed":false}`} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, "sqlite", nil)
			hs := wrappedServer(t, c, func(s http.Handler, w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/internal/task-claim" {
					s.ServeHTTP(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, stub)
			})
			var logs logBuffer
			ws := drover.NewWorkers()
			drover.Register(ws, "pay", func(context.Context, *drover.Job, struct{}) (any, error) { return nil, nil })
			cfg := fastWorkerConfig(ws)
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			enqueue(t, c, "pay", nil, nil)
			startRemoteWorker(t, drover.RemoteConfig{URL: hs.URL, WaitSeconds: -1}, cfg)
			deadline := time.Now().Add(waitTimeout)
			for !strings.Contains(logs.String(), `msg="claim failed"`) {
				if time.Now().After(deadline) {
					t.Fatalf("no \"claim failed\" logged %s after the claims were answered %s; logs:\n%s", waitTimeout, stub, logs.String())
				}
				time.Sleep(10 * time.Millisecond) // the log is the only signal
			}
			if !strings.Contains(logs.String(), `no \"tasks\"`) {
				t.Errorf("the claim failure does not say the answer had no tasks:\n%s", logs.String())
			}
		})
	}
}
