package drover_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/server"
)

// A heartbeat answered 200 {} (a proxy answering for a server it could not
// reach) renewed nothing: a server's answer says the lease it renewed
// (lease_expires_at) or that the job was canceled. The worker takes such an
// answer as a failed heartbeat, and stops the handler before the lease last
// renewed may expire. Before, it counted as a renewal: the handler ran on
// past its lease, the reaper gave the job to the worker's other slot, and it
// ran twice at once.
func TestRemoteHeartbeatAnsweredWithoutALeaseRenewsNothing(t *testing.T) {
	c := newClient(t, "sqlite", nil)
	runEngine(t, c)
	const lease = time.Second
	s := server.New(c, server.Config{LeaseDuration: lease, Backoff: func(int) time.Duration { return 0 }})
	var stubbed atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/internal/heartbeat" {
			stubbed.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{}`))
			return
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { hs.Close(); s.Close() })

	ws := drover.NewWorkers()
	var inFlight, most atomic.Int32
	drover.Register(ws, "pay", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-time.After(3 * lease): // the charge's own work, past its lease
			return "paid", nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	cfg := fastWorkerConfig(ws)
	cfg.LeaseDuration = lease
	cfg.Queues = map[string]int{drover.DefaultQueue: 2}
	id := enqueue(t, c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 2}).ID
	startRemoteWorker(t, drover.RemoteConfig{URL: hs.URL, WaitSeconds: 1}, cfg)
	j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
	if m := most.Load(); m != 1 {
		t.Errorf("the job ran %d times at once with every heartbeat answered {} (%d heartbeats); want once at a time (%s)",
			m, stubbed.Load(), describe(j))
	}
}
