package drover_test

import (
	"context"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/server"
)

// A remote worker whose WaitSeconds is longer than the server's longest long
// poll (server.Config.MaxWait, 60 s, which drover server does not let an
// operator change) still claims: the server waits as long as it allows. Every
// claim of such a worker was refused 400 ("invalid wait_seconds: 61, must be
// 0 to 60"), which the worker, whose logger discards by default, logged at
// most, and it never ran a job, while NewRemoteWorker and Start had said
// nothing was wrong.
func TestRemoteWorkerWaitLongerThanTheServersClaims(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ts := startServer(t, kind, server.Config{})
		ws := drover.NewWorkers()
		drover.Register(ws, "echo", func(context.Context, *drover.Job, struct{}) (any, error) { return "ran", nil })
		startRemoteWorker(t, drover.RemoteConfig{URL: ts.url, WaitSeconds: 61}, fastWorkerConfig(ws))
		id := enqueue(t, ts.c, "echo", nil, nil).ID
		waitStatus(t, ts.c, id, drover.StatusSucceeded)
	})
}
