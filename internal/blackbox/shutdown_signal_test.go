package blackbox

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
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

			cmd := exec.Command(droverBin, "worker", "--database-url", url, "--queues", "signals",
				"--shutdown-timeout", "10m", "--no-engine", "--log-level", "warn")
			cmd.Env = cleanEnv()
			cmd.Stdout = io.Discard
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			out := &lockedBuffer{}
			shuttingDown := make(chan struct{})
			read := make(chan struct{})
			go func() {
				defer close(read)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					out.WriteString(sc.Text() + "\n")
					if strings.HasPrefix(sc.Text(), "shutting down:") {
						close(shuttingDown)
					}
				}
			}()
			exited := make(chan struct{}) // closed once waitErr is set
			var waitErr error
			go func() { <-read; waitErr = cmd.Wait(); close(exited) }()
			t.Cleanup(func() {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				select {
				case <-exited:
				case <-time.After(time.Minute):
				}
				if t.Failed() {
					t.Logf("drover worker stderr:\n%s", out.String())
				}
			})

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

			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-shuttingDown:
			case <-time.After(30 * time.Second):
				t.Fatal("no \"shutting down:\" line 30s after SIGTERM")
			}
			signaled := time.Now()
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
				var ee *exec.ExitError
				if err := waitErr; errors.As(err, &ee) {
					t.Fatalf("drover worker exited with %d after a second signal, want 0", ee.ExitCode())
				} else if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("drover worker still running 30s after a second signal (SIGTERM, then SIGINT; --shutdown-timeout 10m)")
			}
			if !strings.Contains(out.String(), "second signal") {
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
