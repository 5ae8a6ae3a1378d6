package drover_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
	"github.com/drover-dev/drover/server"
)

// TestCrashRemoteWorkerSIGKILL: a remote worker process — no database access, only
// the worker protocol of a real server on loopback — is SIGKILLed while it runs
// jobs. Its jobs are reclaimed after the lease expires and finish on another
// remote worker; none is lost, and the dead worker's late report is refused (409).
func TestCrashRemoteWorkerSIGKILL(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testCrashRemoteWorker(t, kind)
		})
	}
}

func testCrashRemoteWorker(t *testing.T, kind string) {
	const n, holdEvery = 200, 25
	ctx := context.Background()
	drv := testdb.Open(t, kind)
	client, err := drover.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(client, server.Config{LeaseDuration: crashLease})
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	params := make([]drover.EnqueueParams, n)
	for i := range params {
		params[i] = drover.EnqueueParams{Kind: "crashwork", Args: crashArgs{I: i}}
	}
	res, err := client.EnqueueMany(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	indexOf := map[int64]int{}
	for i, r := range res {
		indexOf[r.Job.ID] = i
	}

	out := newOutputLog()
	victim := startHelper(t, out, "remote-victim-"+kind, "remote-worker",
		envHelperServer+"="+hs.URL, envHelperLease+"="+crashLease.String(), envHelperHoldMod+"="+strconv.Itoa(holdEvery))
	type fence struct {
		attempt int
		token   string
	}
	held := map[int64]fence{} // jobs the victim was surely running when killed
	cursor := 0
	out.await(t, &cursor, 60*time.Second, "3 holding jobs started in the remote victim", func(pl procLine) bool {
		f := fields(pl.Text)
		if len(f) != 4 || f[0] != "started" {
			return false
		}
		id, _ := strconv.ParseInt(f[1], 10, 64)
		if attempt, _ := strconv.Atoi(f[2]); indexOf[id]%holdEvery == 0 && attempt == 1 {
			held[id] = fence{attempt, f[3]}
		}
		return len(held) >= 3
	})
	victim.kill(t)
	victim.requireKilled(t)
	// What the kill left: the held jobs run under the victim's fence, and the
	// jobs it completed must never run again.
	before := map[int64]*drover.Job{}
	for _, j := range listAll(t, drv) {
		before[j.ID] = j
		if f, ok := held[j.ID]; ok && (j.Status != lifecycle.StatusRunning || j.Attempt != f.attempt || j.LeaseToken != f.token) {
			t.Errorf("held job %d after the kill: %s at attempt %d token %q; want running at attempt %d token %q (the victim's)",
				j.ID, j.Status, j.Attempt, j.LeaseToken, f.attempt, f.token)
		}
	}

	// The engine reaps the dead worker's leases; a second remote worker finishes.
	engineCtx, stopEngine := context.WithCancel(ctx)
	engineDone := make(chan struct{})
	engine := drover.NewEngine(client, &drover.EngineConfig{LeaderTTL: time.Second, ReapInterval: 100 * time.Millisecond})
	go func() { defer close(engineDone); engine.Run(engineCtx) }()
	t.Cleanup(func() { stopEngine(); <-engineDone })
	survivor, err := drover.NewRemoteWorker(drover.RemoteConfig{URL: hs.URL, WaitSeconds: 1}, &drover.WorkerConfig{
		ID: "remote-survivor", Queues: map[string]int{drover.DefaultQueue: 8},
		Workers:       crashWorkers(&syncWriter{w: &lineWriter{log: out, proc: "remote-survivor"}}, "survivor"),
		LeaseDuration: crashLease, PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := survivor.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = survivor.Stop(context.Background()) })

	eventually(t, 90*time.Second, "every job succeeded", func() (bool, string) {
		jobs := listAll(t, drv)
		done := 0
		for _, j := range jobs {
			if j.Status == lifecycle.StatusSucceeded {
				done++
			}
		}
		return done == n && len(jobs) == n, fmt.Sprintf("%d of %d succeeded (%d jobs)", done, n, len(jobs))
	})

	for _, pl := range out.since(0) {
		f := fields(pl.Text)
		if pl.Proc != "remote-survivor" || len(f) != 4 || f[0] != "started" {
			continue
		}
		id, _ := strconv.ParseInt(f[1], 10, 64)
		if b := before[id]; b != nil && b.Status == lifecycle.StatusSucceeded {
			t.Errorf("the survivor ran job %d (attempt %s), which had succeeded at attempt %d before the kill", id, f[2], b.Attempt)
		}
	}
	seen := map[int]bool{}
	for _, j := range listAll(t, drv) {
		var r struct{ I int }
		if err := json.Unmarshal(j.Result, &r); err != nil || seen[r.I] {
			t.Errorf("job %d: result %s (duplicate or unreadable)", j.ID, j.Result)
		}
		seen[r.I] = true
		evs, err := drv.JobEvents(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := lifecycle.CheckHistory(evs); err != nil {
			t.Errorf("job %d: illegal history: %v", j.ID, err)
		}
		if err := lifecycle.CheckInvariants(j.State()); err != nil {
			t.Errorf("job %d: %v", j.ID, err)
		}
		f, wasHeld := held[j.ID]
		if !wasHeld {
			continue
		}
		var stalled, requeued bool
		for _, e := range evs {
			stalled = stalled || (e.Type == lifecycle.EventStalled && e.Attempt == f.attempt)
			requeued = requeued || (e.Type == lifecycle.EventRequeued && e.Attempt == f.attempt)
		}
		if !stalled || !requeued || j.Attempt <= f.attempt {
			t.Errorf("held job %d: stalled %t requeued %t final attempt %d; want reclaimed through stalled after attempt %d",
				j.ID, stalled, requeued, j.Attempt, f.attempt)
		}
		// The dead worker's late report: refused, nothing changes.
		body, _ := json.Marshal(map[string]any{"task_id": j.ID, "attempt": f.attempt, "lease_token": f.token,
			"status": "succeeded", "output": map[string]string{"late": "yes"}, "request_id": "late-" + strconv.FormatInt(j.ID, 10)})
		resp, err := http.Post(hs.URL+"/internal/task-complete", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		after, err := drv.JobGet(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusConflict || after.Rev != j.Rev || string(after.Result) != string(j.Result) {
			t.Errorf("late report for job %d: HTTP %d, rev %d→%d, result %s→%s; want 409 and nothing changed",
				j.ID, resp.StatusCode, j.Rev, after.Rev, j.Result, after.Result)
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct results, want %d", len(seen), n)
	}
}
