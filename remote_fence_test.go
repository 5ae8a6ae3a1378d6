package drover_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

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
