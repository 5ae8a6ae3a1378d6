package blackbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// TestSecondSignalCancelsRunningJobsAtOnce: `drover worker` stops gracefully
// on SIGTERM, waiting up to --shutdown-timeout for its running jobs; a second
// signal (here SIGINT, a second Ctrl-C) cuts that wait, as most tools do: the
// running jobs are canceled at once, given back to be retried at once, the
// process says so and exits 0. The second signal was ignored: an operator
// who wanted out had only SIGKILL, which leaves the jobs running under
// nobody until their lease expires.
func TestSecondSignalCancelsRunningJobsAtOnce(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := testdb.URL(t, kind)
			c, err := drover.NewClient(testdb.OpenURL(t, kind, url), nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Enqueue(ctx, "sleep", map[string]int{"ms": 600_000}, &drover.EnqueueOpts{Queue: "signals", Timeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}

			p := startWatched(t, nil, "worker", "--database-url", url, "--queues", "signals",
				"--shutdown-timeout", "10m", "--no-engine", "--log-level", "warn")

			// The job runs: its handler sleeps ten minutes (its timeout is an hour), unless canceled.
			deadline := time.Now().Add(30 * time.Second)
			for {
				j, err := c.Get(ctx, res.Job.ID)
				if err != nil {
					t.Fatal(err)
				}
				if j.Status == drover.StatusRunning {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("job %d is %s 30s after the worker started, want running", j.ID, j.Status)
				}
				time.Sleep(20 * time.Millisecond) // the row's state is the only signal
			}

			signaled := p.stopTwice(t, "drover worker")
			if !strings.Contains(p.out.String(), "second signal") {
				t.Errorf("stderr does not say the second signal canceled the running jobs")
			}
			j, err := c.Get(ctx, res.Job.ID)
			if err != nil {
				t.Fatal(err)
			}
			// Given back to be retried at once, not left to wait for its lease.
			if j.Status != drover.StatusQueued || j.Attempt != 1 || j.RunAt.After(signaled.Add(5*time.Second)) {
				t.Fatalf("job after the second signal: status %s, attempt %d, run_at %s (signal at %s); want queued, attempt 1, due at once",
					j.Status, j.Attempt, j.RunAt.Format(time.RFC3339Nano), signaled.Format(time.RFC3339Nano))
			}
		})
	}
}
