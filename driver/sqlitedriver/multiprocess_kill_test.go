package sqlitedriver

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// h40Env names what a re-executed test binary does (TestHelperH40) and on
// which file: "migrate:PATH" or "victim:PATH".
const h40Env = "DROVER_SQLITEDRIVER_H40"

// startH40 starts the test binary as a helper process doing mode on path.
func startH40(t *testing.T, mode, path string, out io.Writer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperH40$", "-test.count=1")
	cmd.Env = append(os.Environ(), h40Env+"="+mode+":"+path)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// Processes that migrate one new file at once, as `drover dev` and a CLI
// command started together do, all succeed and leave it at the latest
// version, clean, with one copy of each table: each waits for the other's
// migration transaction (SQLite's own lock, across processes, not the
// in-process lock table of one process's connections) and finds it done.
func TestMultiProcessMigrateUp(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	ctx := context.Background()
	for round := range 3 {
		path := filepath.Join(t.TempDir(), "drover.db")
		const procs = 4
		outs := make([]*bytes.Buffer, procs)
		cmds := make([]*exec.Cmd, procs)
		for i := range cmds {
			outs[i] = &bytes.Buffer{}
			cmds[i] = startH40(t, "migrate", path, outs[i])
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("round %d: migrating process %d: %v\n%s", round, i, err, outs[i])
			}
		}
		d, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := d.MigrateStatus(ctx)
		if err != nil || st.Dirty || st.Current != st.Latest() {
			t.Fatalf("round %d: after %d processes migrated: %+v, %v; want the latest version, clean", round, procs, st, err)
		}
		var check string
		if err := d.write.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
			t.Fatalf("round %d: integrity_check = %q, %v", round, check, err)
		}
		d.Close()
	}
}

// A process SIGKILLed during its migration (migrations 008 to 010 of a file
// at 7 with 2,000 jobs, killed once it holds the write lock) leaves the file
// at version 7 as it was, clean, every job there; the next MigrateUp applies
// them. A kill that came after the commit leaves the latest version instead,
// as clean; at least one round must kill it part-way.
func TestMultiProcessMigrationKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "drover.db")
	d := openMigratedAt(t, path)
	const jobs = 2_000
	ps := make([]driver.InsertParams, 1000)
	for i := range ps {
		ps[i] = params("mp")
	}
	for range jobs / len(ps) {
		if _, err := d.JobInsertMany(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	st, err := d.MigrateStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A connection that never waits for the lock: BUSY says the migrator has it.
	probe, err := sql.Open("sqlite", path+"?_busy_timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	probe.SetMaxOpenConns(1)
	locked := func() bool {
		_, err := probe.ExecContext(ctx, "BEGIN IMMEDIATE; ROLLBACK")
		return isBusy(err)
	}

	killedPartWay := 0
	for round := 0; round < 5 && killedPartWay < 2; round++ {
		migrateTo(t, d, 7)
		before := tableSQL(t, d)
		victim := startH40(t, "migrate", path, io.Discard)
		done := make(chan error, 1)
		go func() { done <- victim.Wait() }()
		waiting := true
		for waiting && !locked() {
			select {
			case <-done:
				waiting = false
			default:
			}
		}
		_ = victim.Process.Kill()
		if waiting {
			<-done
		}
		got, err := d.MigrateStatus(ctx)
		switch {
		case err != nil || got.Dirty:
			t.Fatalf("round %d: after the kill: %+v, %v; want a clean version", round, got, err)
		case got.Current == 7:
			killedPartWay++
			if after := tableSQL(t, d); after != before {
				t.Fatalf("round %d: killed at version 7, drover_jobs is now\n%s\nwant it as it was:\n%s", round, after, before)
			}
		case got.Current != st.Latest():
			t.Fatalf("round %d: after the kill: version %d; want 7 or %d", round, got.Current, st.Latest())
		}
		var check string
		if err := d.write.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
			t.Fatalf("round %d: integrity_check = %q, %v", round, check, err)
		}
		if err := d.MigrateUp(ctx); err != nil {
			t.Fatalf("round %d: MigrateUp after the kill: %v", round, err)
		}
		var n int
		if err := d.read.QueryRowContext(ctx, "SELECT count(*) FROM drover_jobs").Scan(&n); err != nil || n != jobs {
			t.Fatalf("round %d: %d jobs, %v; want %d", round, n, err, jobs)
		}
	}
	if killedPartWay == 0 {
		t.Fatal("no round killed the migrator part-way")
	}
}

// A process SIGKILLed while it holds the file's write lock (its own
// transaction on DB() open, a job of it written) leaves a file every other
// process can write at once, in which nothing of that transaction is, and
// nothing else is lost: a job it had committed and started is still its own
// until its lease ends, then reaped and claimed again; the leadership lease
// it held stays its own until its TTL ends, then another process leads.
func TestMultiProcessKilledWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "drover.db")
	d := openMigratedAt(t, path)
	res, err := d.JobInsertMany(ctx, []driver.InsertParams{params("mp")})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].Job.ID

	pr, pw := io.Pipe()
	victim := startH40(t, "victim", path, pw)
	done := make(chan error, 1)
	go func() { done <- victim.Wait(); pw.Close() }()
	lines := bufio.NewScanner(pr)
	var ready string
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "ready ") {
			ready = lines.Text()
			break
		}
		t.Log(lines.Text())
	}
	if ready == "" {
		t.Fatalf("the victim ended before it was ready: %v", <-done)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	var uncommitted int64
	var now time.Time
	var nowUS int64
	if _, err := fmt.Sscanf(ready, "ready %d %d", &uncommitted, &nowUS); err != nil {
		t.Fatalf("%q: %v", ready, err)
	}
	now = fromMicros(nowUS)

	// It holds the write lock: a write waits.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = d.JobInsertMany(short, []driver.InsertParams{params("other")})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("insert while the victim holds the write lock: %v; want it to wait past its deadline", err)
	}

	if err := victim.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done

	// Its lock went with it: a write goes through well within busy_timeout.
	short, cancel = context.WithTimeout(ctx, 2*time.Second)
	_, err = d.JobInsertMany(short, []driver.InsertParams{params("other")})
	cancel()
	if err != nil {
		t.Fatalf("insert once the victim is dead: %v; want it at once", err)
	}
	var check string
	if err := d.write.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v", check, err)
	}
	// (SQLite may give its id to the job just inserted: look by queue.)
	if mp, err := d.JobList(ctx, driver.ListParams{Queue: "mp"}); err != nil || len(mp) != 1 || mp[0].ID != id {
		t.Errorf("queue mp after the kill: %d jobs, %v; want only job %d, not job %d of the victim's open transaction", len(mp), err, id, uncommitted)
	}

	// The job it started is its own until its lease ends.
	j, err := d.JobGet(ctx, id)
	if err != nil || j.Status != lifecycle.StatusRunning || j.Owner != "victim" || j.Attempt != 1 {
		t.Fatalf("the victim's job: %+v, %v; want running, the victim's, attempt 1", j, err)
	}
	if js, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"mp"}, Owner: "survivor", LeaseDuration: time.Minute, Now: &now}); err != nil || len(js) != 0 {
		t.Fatalf("claim while the victim's lease holds: %v, %v; want none", js, err)
	}
	later := now.Add(time.Minute + time.Second)
	if reaped, err := d.JobReapExpired(ctx, driver.ReapParams{Now: &later}); err != nil || len(reaped) != 1 || reaped[0].ID != id {
		t.Fatalf("reap past the victim's lease: %v, %v; want job %d", reaped, err, id)
	}
	js, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"mp"}, Owner: "survivor", LeaseDuration: time.Minute, Now: &later})
	if err != nil || len(js) != 1 || js[0].ID != id || js[0].Attempt != 2 {
		t.Fatalf("claim after the reap: %v, %v; want job %d at attempt 2", js, err, id)
	}

	// Its leadership is its own until the TTL ends.
	if lead, err := d.LeaderAttemptElect(ctx, driver.LeaderParams{ID: "survivor", TTL: time.Minute, Now: &now}); err != nil || lead {
		t.Fatalf("elect while the victim's leadership holds: %v, %v; want false", lead, err)
	}
	if lead, err := d.LeaderAttemptElect(ctx, driver.LeaderParams{ID: "survivor", TTL: time.Minute, Now: &later}); err != nil || !lead {
		t.Fatalf("elect past the victim's TTL: %v, %v; want true", lead, err)
	}
}

// TestHelperH40 is the body of the processes the tests above start.
func TestHelperH40(t *testing.T) {
	mode, path, ok := strings.Cut(os.Getenv(h40Env), ":")
	if !ok {
		t.Skip("run by TestMultiProcessMigrateUp and TestMultiProcessKilledWriter")
	}
	ctx := context.Background()
	d, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	switch mode {
	case "migrate":
		if err := d.MigrateUp(ctx); err != nil {
			t.Fatal(err)
		}
	case "victim":
		now := time.Now().UTC().Truncate(time.Microsecond)
		if lead, err := d.LeaderAttemptElect(ctx, driver.LeaderParams{ID: "victim", TTL: time.Minute, Now: &now}); err != nil || !lead {
			t.Fatalf("elect: %v, %v", lead, err)
		}
		js, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"mp"}, Owner: "victim", LeaseDuration: time.Minute, Start: true, Now: &now})
		if err != nil || len(js) != 1 {
			t.Fatalf("claim: %v, %v", js, err)
		}
		tx, err := d.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := d.JobInsertManyTx(ctx, tx, []driver.InsertParams{params("mp")})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ready %d %d\n", res[0].Job.ID, micros(now))
		_ = tx
		var never chan struct{}
		<-never // until SIGKILL
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}
