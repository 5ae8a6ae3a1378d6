package drover_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/server"
)

// stubFirstReport forwards every request to upstream but answers the first
// task-complete itself, 200 {}, as a gateway's stub would, forwarding none of
// it.
type stubFirstReport struct {
	upstream string
	stubbed  atomic.Bool
}

func (p *stubFirstReport) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path == "/internal/task-complete" && p.stubbed.CompareAndSwap(false, true) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
		return
	}
	if a, ok := relay(w, r, p.upstream, body); ok {
		a.write(w)
	}
}

// A 2xx answer to a report that is not the job it was recorded on (a
// gateway's 200 {}) is no answer: the report is sent again and recorded. It
// was taken for a recorded result: the worker told "succeeded" and sent it no
// more, the job ran again after its lease, and on its last attempt it failed
// though its handler had succeeded (helper-88).
func TestRemoteReportAnsweredByAStubIsSentAgain(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{LeaseDuration: 2 * time.Second})
		proxy := &stubFirstReport{upstream: ts.url}
		ps := httptest.NewServer(proxy)
		t.Cleanup(ps.Close)
		var runs atomic.Int32
		ws := drover.NewWorkers()
		drover.Register(ws, "pay", func(context.Context, *drover.Job, struct{}) (any, error) {
			runs.Add(1)
			return map[string]string{"paid": "yes"}, nil
		})
		startRemoteWorker(t, drover.RemoteConfig{URL: ps.URL, WaitSeconds: 1}, fastWorkerConfig(ws))
		id := enqueue(t, ts.c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		j := waitStatus(t, ts.c, id, drover.StatusSucceeded, drover.StatusFailed)
		if !proxy.stubbed.Load() || j.Status != drover.StatusSucceeded || runs.Load() != 1 || string(j.Result) != `{"paid": "yes"}` && string(j.Result) != `{"paid":"yes"}` {
			t.Errorf("stubbed %v: %s after %d runs, result %s; want succeeded after one run with its result", proxy.stubbed.Load(), describe(j), runs.Load(), j.Result)
		}
	})
}
