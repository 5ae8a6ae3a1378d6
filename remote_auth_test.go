package drover_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/server"
)

// A report the server answers 401 or 403 was refused for the worker's token,
// not for what it says: it is sent again, with its request_id, until its
// deadline, and never replaced by a failure. Behind a load balancer during a
// token rotation (one server already on the new worker token, one still on
// the old), a success answered 401 by the old one was reported instead as a
// permanent failure, "the result was refused by the server", which the new
// one took: a job whose handler had run, its side effects done, went to the
// DLQ, and a requeue from there ran it again.
func TestRemoteReportRefusedForItsTokenIsNotTurnedIntoAFailure(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		newer := server.New(c, server.Config{LeaseDuration: serverLease, WorkerToken: "new"})
		older := server.New(c, server.Config{LeaseDuration: serverLease, WorkerToken: "old"})
		var reports atomic.Int32
		// The load balancer: the first report goes to the server not yet on
		// the new token, everything else to the one that is.
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/internal/task-complete" && reports.Add(1) == 1 {
				older.ServeHTTP(w, r)
				return
			}
			newer.ServeHTTP(w, r)
		}))
		t.Cleanup(func() { hs.Close(); newer.Close(); older.Close() })

		ws := drover.NewWorkers()
		var runs atomic.Int32
		drover.Register(ws, "pay", func(context.Context, *drover.Job, struct{}) (any, error) {
			runs.Add(1)
			return "paid", nil
		})
		wcfg := fastWorkerConfig(ws)
		wcfg.LeaseDuration = serverLease
		startRemoteWorker(t, drover.RemoteConfig{URL: hs.URL, Token: "new", WaitSeconds: 1}, wcfg)
		id := enqueue(t, c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 3}).ID
		j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || runs.Load() != 1 {
			t.Errorf("a success answered 401 once: %s (error %q), handler ran %d times; want succeeded, run once",
				describe(j), j.Error, runs.Load())
		}
		if !strings.Contains(string(j.Result), "paid") {
			t.Errorf("result %s, want the handler's", j.Result)
		}
	})
}
