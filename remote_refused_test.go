package drover_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/server"
)

// A remote worker whose report the server refuses (a result or an error too
// large for a request, a snooze it does not take) reports a failure that says
// so instead of leaving the job running until its lease expires, when the reaper
// would count the execution again and the handler run again to the same end.
// A snooze longer than MaxSnooze is cut to it under either worker, so both
// snooze alike.
func TestRemoteWorkerReportsARefusedOutcomeAsAFailure(t *testing.T) {
	type want struct {
		status   drover.JobStatus
		runAfter time.Duration // run_at at least this far ahead
		error    string        // contained in the job's error
	}
	cases := []struct {
		name          string
		fn            func(ctx context.Context, job *drover.Job, _ struct{}) (any, error)
		local, remote want
	}{
		{"snooze of 400 days", func(context.Context, *drover.Job, struct{}) (any, error) {
			return nil, drover.Snooze(400 * 24 * time.Hour)
		}, want{status: drover.StatusQueued, runAfter: 365 * 24 * time.Hour}, want{status: drover.StatusQueued, runAfter: 365 * 24 * time.Hour}},
		{"result of 3 MiB", func(context.Context, *drover.Job, struct{}) (any, error) {
			return map[string]string{"blob": strings.Repeat("x", 3<<20)}, nil
		}, want{status: drover.StatusSucceeded}, want{status: drover.StatusFailed, error: "the result was refused by the server"}},
		{"permanent error of 3 MiB", func(context.Context, *drover.Job, struct{}) (any, error) {
			return nil, drover.Permanent(errors.New(strings.Repeat("e", 3<<20)))
		}, want{status: drover.StatusFailed, error: "eeee"}, want{status: drover.StatusFailed, error: "the failure report was refused by the server"}},
	}
	for _, tc := range cases {
		for _, mode := range []string{"local", "remote"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				ws := drover.NewWorkers()
				drover.Register(ws, "k", tc.fn)
				cfg := fastWorkerConfig(ws)
				var c *drover.Client
				w := tc.local
				if mode == "local" {
					c = newClient(t, "sqlite", nil)
					startWorker(t, c, cfg)
				} else {
					ts := startServer(t, "sqlite", server.Config{})
					c = ts.c
					cfg.LeaseDuration = serverLease
					startRemoteWorker(t, drover.RemoteConfig{URL: ts.url, WaitSeconds: 1}, cfg)
					w = tc.remote
				}
				res, err := c.Enqueue(context.Background(), "k", nil, &drover.EnqueueOpts{MaxAttempts: 3})
				if err != nil {
					t.Fatal(err)
				}
				var j *drover.Job
				if w.status == drover.StatusQueued {
					// queued again after the run: wait for the snooze's event
					waitFor(t, "the snooze", func() bool {
						j = getJob(t, c, res.Job.ID)
						return j.Status == drover.StatusQueued && j.Attempt == 1
					})
				} else {
					j = waitStatus(t, c, res.Job.ID, w.status)
				}
				if j.Executions > 1 || j.Attempt != 1 {
					t.Errorf("%s: attempt %d, executions %d, want one run", mode, j.Attempt, j.Executions)
				}
				if ahead := time.Until(j.RunAt); w.runAfter > 0 && (ahead < w.runAfter || ahead > drover.MaxSnooze) {
					t.Errorf("%s: run_at %s ahead, want at least %s and at most MaxSnooze", mode, ahead.Round(time.Hour), w.runAfter)
				}
				if !strings.Contains(j.Error, w.error) {
					t.Errorf("%s: error %.200q, want it to contain %q", mode, j.Error, w.error)
				}
				if mode == "remote" && len(j.Error) > 8<<10 {
					t.Errorf("remote: the reported error is %d bytes, want it cut to a few kB", len(j.Error))
				}
			})
		}
	}
}

// A long poll that waits longer than a lease before a job arrives: the job's
// lease begins when the server claims it, not when the worker's request went
// out, so the worker must not give it up as unrenewed at once.
func TestRemoteWorkerTimesALongPollsLeaseFromItsAnswer(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{}) // the lease: serverLease
		ws := drover.NewWorkers()
		canceled := make(chan error, 1)
		drover.Register(ws, "work", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			work := time.NewTimer(300 * time.Millisecond)
			defer work.Stop()
			select {
			case <-work.C:
				return "done", nil
			case <-ctx.Done():
				canceled <- context.Cause(ctx)
				return nil, ctx.Err()
			}
		})
		cfg := fastWorkerConfig(ws)
		cfg.LeaseDuration = serverLease
		startRemoteWorker(t, drover.RemoteConfig{URL: ts.url, WaitSeconds: 30}, cfg)
		waitFor(t, "the worker's long poll", func() bool { return ts.claims.Load() == 1 })
		quiet := time.NewTimer(serverLease + 500*time.Millisecond) // the queue stays empty longer than a lease
		<-quiet.C
		id := enqueue(t, ts.c, "work", nil, &drover.EnqueueOpts{MaxAttempts: 5}).ID
		j := waitStatus(t, ts.c, id, drover.StatusSucceeded, drover.StatusFailed)
		select {
		case cause := <-canceled:
			t.Errorf("the handler of a job a long poll had just claimed was canceled: %v", cause)
		default:
		}
		if j.Status != drover.StatusSucceeded || j.Attempt != 1 {
			t.Errorf("job claimed by a long poll older than a lease: %s, want succeeded at its first attempt", describe(j))
		}
	})
}
