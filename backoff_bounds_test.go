package drover_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/server"
)

// A custom backoff is user code, and its delay was added to the database's
// clock as given: one that overflowed to math.MaxInt64 parked its job until
// the year 2318. A delay past MaxBackoff is cut to it; a negative one retries
// at once, as 0 does (and as Snooze treats a negative delay), never with a
// run_at before the failure, ahead of the jobs of its priority already
// waiting.
func TestCustomBackoffIsBounded(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		retried := make(chan *drover.Job, 4)
		for name, d := range map[string]time.Duration{
			"huge":     math.MaxInt64,
			"negative": -time.Hour,
			"min":      math.MinInt64,
		} {
			drover.Register(ws, name, func(_ context.Context, j *drover.Job, _ struct{}) (any, error) {
				if j.Executions == 1 {
					return nil, errors.New("first attempt fails")
				}
				retried <- j // as claimed for its retry: run_at is the retry's
				return nil, nil
			}, drover.WithBackoff(func(int) time.Duration { return d }))
		}
		startWorker(t, c, fastWorkerConfig(ws))

		id := enqueue(t, c, "huge", nil, nil).ID
		j := waitJob(t, c, id, "retried", func(j *drover.Job) bool { return j.Executions == 1 && j.Status == drover.StatusQueued })
		if len(j.Errors) != 1 {
			t.Fatalf("huge: %s; want one error", describe(j))
		}
		if latest := j.Errors[0].At.Add(drover.MaxBackoff); j.RunAt.After(latest) {
			t.Errorf("huge: failed at %s, retried at %s; want no later than MaxBackoff (%s) after the failure",
				j.Errors[0].At.Format(time.RFC3339), j.RunAt.Format(time.RFC3339), drover.MaxBackoff)
		}

		for _, name := range []string{"negative", "min"} {
			id := enqueue(t, c, name, nil, nil).ID
			r := waitChan(t, retried, name+"'s retry")
			if r.ID != id || len(r.Errors) != 1 {
				t.Fatalf("%s: retry of job %d: %s; want job %d with one error", name, r.ID, describe(r), id)
			}
			if r.RunAt.Before(r.Errors[0].At) {
				t.Errorf("%s: failed at %s, retried at %s: before its failure, ahead of the jobs already waiting",
					name, r.Errors[0].At.Format(time.RFC3339Nano), r.RunAt.Format(time.RFC3339Nano))
			}
			waitStatus(t, c, id, drover.StatusSucceeded)
		}
	})
}

// A server's Config.Backoff decides a remote worker's retries, and is bounded
// alike: a negative delay put the job's run_at before its failure (ahead of
// the jobs of its priority already waiting), a huge one parked it until 2318.
func TestServerBackoffIsBounded(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		for name, d := range map[string]time.Duration{"huge": math.MaxInt64, "negative": -time.Hour} {
			ts := startServer(t, kind, server.Config{Backoff: func(int) time.Duration { return d }})
			ws := drover.NewWorkers()
			retried := make(chan *drover.Job, 1)
			drover.Register(ws, "flaky", func(_ context.Context, j *drover.Job, _ struct{}) (any, error) {
				if j.Executions == 1 {
					return nil, errors.New("first attempt fails")
				}
				retried <- j // as claimed for its retry: run_at is the retry's
				return nil, nil
			})
			startRemoteWorker(t, drover.RemoteConfig{URL: ts.url}, fastWorkerConfig(ws))
			id := enqueue(t, ts.c, "flaky", nil, nil).ID
			if name == "huge" {
				j := waitJob(t, ts.c, id, "retried", func(j *drover.Job) bool { return j.Executions == 1 && j.Status == drover.StatusQueued })
				if latest := j.Errors[0].At.Add(drover.MaxBackoff); j.RunAt.After(latest) {
					t.Errorf("huge: failed at %s, retried at %s; want no later than MaxBackoff (%s) after the failure",
						j.Errors[0].At.Format(time.RFC3339), j.RunAt.Format(time.RFC3339), drover.MaxBackoff)
				}
				continue
			}
			waitChan(t, retried, name+"'s retry")
			// A task carries no error history: the job as stored, whose run_at
			// is still its retry's.
			r := waitStatus(t, ts.c, id, drover.StatusSucceeded)
			if len(r.Errors) != 1 {
				t.Fatalf("%s: %s; want one error", name, describe(r))
			}
			if r.RunAt.Before(r.Errors[0].At) {
				t.Errorf("%s: failed at %s, retried at %s: before its failure, ahead of the jobs already waiting",
					name, r.Errors[0].At.Format(time.RFC3339Nano), r.RunAt.Format(time.RFC3339Nano))
			}
		}
	})
}
