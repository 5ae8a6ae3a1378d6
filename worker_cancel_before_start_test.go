package drover_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/server"
)

// holdClaimProxy forwards every request to upstream and holds the answer of
// the first task-claim that carries a task (the server has committed the
// claim) until release is closed, as a slow network would; claimHeld closes
// when it holds one. It counts the task-cancels long polls at the server and
// the answers of them that named a task.
type holdClaimProxy struct {
	upstream    string
	claimHeld   chan struct{}
	release     chan struct{}
	heldOnce    sync.Once
	cancelPolls atomic.Int32
	cancelsSeen atomic.Int32
}

func (p *holdClaimProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	isCancels := r.URL.Path == "/internal/task-cancels"
	if isCancels {
		p.cancelPolls.Add(1)
	}
	a, ok := relay(w, r, p.upstream, body)
	if isCancels {
		p.cancelPolls.Add(-1)
	}
	if !ok {
		return
	}
	if isCancels && bytes.Contains(a.body, []byte(`"task_ids":[`)) && !bytes.Contains(a.body, []byte(`"task_ids":[]`)) {
		p.cancelsSeen.Add(1)
	}
	if r.URL.Path == "/internal/task-claim" && bytes.Contains(a.body, []byte(`"task_id"`)) {
		p.heldOnce.Do(func() { close(p.claimHeld) })
		select {
		case <-p.release:
		case <-r.Context().Done():
			return
		}
	}
	a.write(w)
}

// A cancel heard before the claim's answer arrives (it landed after the
// server committed the claim, while the answer was on its way) stops the
// handler as soon as the job registers, not at its next heartbeat: the
// worker's task-cancels long poll answered the job while no execution of it
// ran, and the pointer was dropped; the handler then ran until the
// heartbeat, 30 minutes away here (helper-89). The library worker takes its
// pointers through the same runningJobs.poke.
func TestCancelHeardBeforeTheClaimsAnswerStopsTheHandler(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{LeaseDuration: time.Hour})
		proxy := &holdClaimProxy{upstream: ts.url, claimHeld: make(chan struct{}), release: make(chan struct{})}
		ps := httptest.NewServer(proxy)
		t.Cleanup(ps.Close)
		var released sync.Once
		releaseClaim := func() { released.Do(func() { close(proxy.release) }) }
		t.Cleanup(releaseClaim)

		started := make(chan int64, 1)
		stopped := make(chan error, 1)
		ws := drover.NewWorkers()
		drover.Register(ws, "long", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			started <- job.ID
			<-ctx.Done()
			stopped <- context.Cause(ctx)
			return nil, ctx.Err()
		})
		cfg := fastWorkerConfig(ws)
		cfg.LeaseDuration, cfg.HeartbeatInterval = time.Hour, 30*time.Minute
		cfg.TimeoutGrace = time.Second
		startRemoteWorker(t, drover.RemoteConfig{URL: ps.URL, WaitSeconds: 20}, cfg)

		job := enqueue(t, ts.c, "long", nil, nil)
		waitChan(t, proxy.claimHeld, "the server to answer the claim of the job")
		deadline := time.Now().Add(waitTimeout)
		for proxy.cancelPolls.Load() == 0 { // the worker's long poll is at the server
			if time.Now().After(deadline) {
				t.Fatal("no task-cancels long poll reached the server")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, err := ts.c.Cancel(context.Background(), job.ID); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		for proxy.cancelsSeen.Load() == 0 { // the worker heard of it
			if time.Now().After(deadline) {
				t.Fatal("the server never answered a task-cancels long poll with the canceled job")
			}
			time.Sleep(5 * time.Millisecond)
		}
		releaseClaim()
		waitChan(t, started, "the handler to start")
		select {
		case cause := <-stopped:
			if cause == nil || !strings.Contains(cause.Error(), "cancel") {
				t.Errorf("handler stopped with cause %v, want the operator's cancel", cause)
			}
		case <-time.After(waitTimeout):
			t.Errorf("job %d, canceled and heard of before its claim's answer came, still runs %s after its handler started: now %s",
				job.ID, waitTimeout, describe(getJob(t, ts.c, job.ID)))
		}
	})
}
