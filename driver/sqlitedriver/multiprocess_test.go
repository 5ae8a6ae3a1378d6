package sqlitedriver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// helperEnv names the database a re-executed test binary works on as a worker.
const helperEnv = "DROVER_SQLITEDRIVER_WORKER_DB"

// TestMultiProcessClaim runs workers in separate OS processes on one database
// file, as the CLI's workers and a crash test's victims do: every job must be
// claimed and completed exactly once, with cross-process locking resting only
// on busy_timeout and BEGIN IMMEDIATE.
func TestMultiProcessClaim(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "drover.db")
	d, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 150
	ps := make([]driver.InsertParams, n)
	for i := range ps {
		ps[i] = params("mp")
	}
	if _, err := d.JobInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}

	const workers = 3
	outs := make([]*bytes.Buffer, workers)
	cmds := make([]*exec.Cmd, workers)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWorker$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+path, "DROVER_WORKER_NAME=p"+strconv.Itoa(i))
		outs[i] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	seen := map[int64]int{}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, outs[i])
		}
		sc := bufio.NewScanner(outs[i])
		for sc.Scan() {
			var id int64
			if _, err := fmt.Sscanf(sc.Text(), "done %d", &id); err == nil {
				seen[id]++
			}
		}
	}
	jobs, err := d.JobList(ctx, driver.ListParams{Limit: n + 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Status != lifecycle.StatusSucceeded || j.Attempt != 1 || seen[j.ID] != 1 {
			t.Errorf("job %d: %s attempt %d, completed %d times by the workers; want succeeded once", j.ID, j.Status, j.Attempt, seen[j.ID])
		}
	}
	if len(jobs) != n {
		t.Fatalf("%d jobs, want %d", len(jobs), n)
	}
}

// TestHelperWorker is the body of one worker process of TestMultiProcessClaim.
func TestHelperWorker(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("run by TestMultiProcessClaim")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	name := os.Getenv("DROVER_WORKER_NAME")
	for {
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"mp"}, Limit: 4, Owner: name, LeaseDuration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) == 0 {
			return
		}
		for _, j := range jobs {
			f := driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken}
			if _, err := d.JobStart(ctx, f); err != nil {
				t.Fatal(err)
			}
			if _, err := d.JobComplete(ctx, driver.CompleteParams{FenceParams: f}); err != nil {
				t.Fatal(err)
			}
			fmt.Printf("done %d\n", j.ID)
		}
	}
}
