package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// openTest opens a fresh, migrated driver on its own file in t.TempDir().
func openTest(t *testing.T) *Driver {
	t.Helper()
	return openMigratedAt(t, filepath.Join(t.TempDir(), "drover.db"))
}

// openMigratedAt opens a migrated driver on the file at path, closed at
// cleanup: for a test whose other processes open the same file.
func openMigratedAt(t *testing.T, path string) *Driver {
	t.Helper()
	d, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.MigrateUp(context.Background()); err != nil {
		t.Fatalf("MigrateUp: %v", err)
	}
	return d
}

func params(queue string) driver.InsertParams {
	return driver.InsertParams{Kind: "email.send", Queue: queue, Args: json.RawMessage(`{"to":"a@b"}`), MaxAttempts: 3}
}

func TestOpenMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "drover.db")
	d, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer d.Close()

	st, err := d.MigrateStatus(ctx)
	if err != nil {
		t.Fatalf("MigrateStatus before: %v", err)
	}
	if st.Current != 0 || st.Dirty || len(st.Available) == 0 || st.Available[0] != 1 {
		t.Fatalf("MigrateStatus before = %+v, want current 0, not dirty, available from 1", st)
	}

	// Concurrent migrators on the same file, as two processes starting together:
	// a second driver on the same path plus two goroutines on this one.
	d2, err := Open("file:"+path, Options{})
	if err != nil {
		t.Fatalf("Open file: URI: %v", err)
	}
	defer d2.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, m := range []*Driver{d, d, d2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- m.MigrateUp(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent MigrateUp: %v", err)
		}
	}

	st, err = d.MigrateStatus(ctx)
	if err != nil {
		t.Fatalf("MigrateStatus after: %v", err)
	}
	last := st.Available[len(st.Available)-1]
	if st.Current != last || st.Dirty {
		t.Fatalf("MigrateStatus after = %+v, want current %d, not dirty", st, last)
	}
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if d.Name() != "sqlite" {
		t.Fatalf("Name() = %q, want sqlite", d.Name())
	}

	// Every connection of both pools runs with the durability settings.
	for name, db := range map[string]*sql.DB{"write": d.write, "read": d.read} {
		for pragma, want := range map[string]string{
			"journal_mode": "wal", "synchronous": "2", "busy_timeout": "10000", "foreign_keys": "1",
		} {
			var got string
			if err := db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
				t.Fatalf("%s pool: PRAGMA %s: %v", name, pragma, err)
			}
			if got != want {
				t.Errorf("%s pool: PRAGMA %s = %s, want %s", name, pragma, got, want)
			}
		}
	}
	// The writer, which checkpoints, cuts the WAL back after a checkpoint.
	var limit int64
	if err := d.write.QueryRowContext(ctx, "PRAGMA journal_size_limit").Scan(&limit); err != nil || limit != walSizeLimit {
		t.Errorf("write pool: PRAGMA journal_size_limit = %d, %v; want %d", limit, err, walSizeLimit)
	}
	if _, err := d.read.ExecContext(ctx, "DELETE FROM drover_jobs"); err == nil {
		t.Error("the read pool accepted a write; want query_only")
	}
}

func TestOpenMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(":memory:", Options{})
	if err != nil {
		t.Fatalf("Open(:memory:): %v", err)
	}
	defer d.Close()
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatalf("MigrateUp: %v", err)
	}
	res, err := d.JobInsertMany(ctx, []driver.InsertParams{params("mem")})
	if err != nil {
		t.Fatalf("JobInsertMany: %v", err)
	}
	// Reads must see the one in-memory database the writer holds.
	if _, err := d.JobGet(ctx, res[0].Job.ID); err != nil {
		t.Fatalf("JobGet: %v", err)
	}
}

func TestOpenRejectsQuestionMarkInPlainPath(t *testing.T) {
	t.Parallel()
	if _, err := Open(filepath.Join(t.TempDir(), "a?b.db"), Options{}); err == nil {
		t.Fatal("Open of a plain path with '?' succeeded, want an error")
	}
}

func TestHappyPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openTest(t)
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	at := func(off time.Duration) *time.Time { x := t0.Add(off); return &x }

	wake, err := d.WakeupSubscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := params("mail")
	p.RunAt = at(-time.Second)
	res, err := d.JobInsertMany(ctx, []driver.InsertParams{p})
	if err != nil {
		t.Fatalf("JobInsertMany: %v", err)
	}
	j := res[0].Job
	if res[0].Existing || j.Status != lifecycle.StatusQueued || j.Rev != 1 || j.Errors == nil {
		t.Fatalf("inserted job = %+v existing %v, want queued rev 1 with empty errors", j, res[0].Existing)
	}
	if q := <-wake; q != "mail" {
		t.Fatalf("wake-up = %q, want mail", q)
	}

	ready, err := d.QueuesReady(ctx, at(0))
	if err != nil || len(ready) != 1 || ready[0] != "mail" {
		t.Fatalf("QueuesReady = %v, %v; want [mail]", ready, err)
	}

	claimed, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"mail"}, Owner: "w1", LeaseDuration: time.Minute, Now: at(0)})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("JobClaim = %v, %v; want one job", claimed, err)
	}
	c := claimed[0]
	if c.Status != lifecycle.StatusClaimed || c.Attempt != 1 || c.Owner != "w1" || !c.LeaseExpiresAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("claimed job = %+v", c)
	}
	if more, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"mail"}, Owner: "w2", LeaseDuration: time.Minute, Now: at(0)}); err != nil || len(more) != 0 {
		t.Fatalf("second JobClaim = %v, %v; want nothing", more, err)
	}

	fp := driver.FenceParams{ID: c.ID, Attempt: c.Attempt, LeaseToken: c.LeaseToken, Now: at(time.Second), LeaseDuration: time.Minute}
	started, err := d.JobStart(ctx, fp)
	if err != nil || started.Status != lifecycle.StatusRunning || started.Executions != 1 {
		t.Fatalf("JobStart = %+v, %v", started, err)
	}
	hb, err := d.JobHeartbeat(ctx, driver.HeartbeatParams{FenceParams: driver.FenceParams{ID: c.ID, Attempt: c.Attempt, LeaseToken: c.LeaseToken, Now: at(2 * time.Second), LeaseDuration: time.Minute}})
	if err != nil || hb.CancelRequested || !hb.LeaseExpiresAt.Equal(t0.Add(62*time.Second)) {
		t.Fatalf("JobHeartbeat = %+v, %v", hb, err)
	}

	stale := fp
	stale.LeaseToken = "00000000-0000-4000-8000-000000000000"
	if _, err := d.JobComplete(ctx, driver.CompleteParams{FenceParams: stale}); !errors.Is(err, driver.ErrLeaseLost) {
		t.Fatalf("JobComplete with a stale token: err = %v, want ErrLeaseLost", err)
	}

	fp.Now, fp.RequestID = at(3*time.Second), "req-1"
	done, err := d.JobComplete(ctx, driver.CompleteParams{FenceParams: fp, Result: json.RawMessage(`{"ok":true}`)})
	if err != nil || done.Status != lifecycle.StatusSucceeded || string(done.Result) != `{"ok":true}` || done.Owner != "" || done.LeaseExpiresAt != nil {
		t.Fatalf("JobComplete = %+v, %v", done, err)
	}
	again, err := d.JobComplete(ctx, driver.CompleteParams{FenceParams: fp})
	if err != nil || !again.Replayed || again.Rev != done.Rev {
		t.Fatalf("repeated JobComplete = %+v, %v; want the same job replayed", again, err)
	}
	if err := lifecycle.CheckInvariants(done.State()); err != nil {
		t.Fatalf("invariants: %v", err)
	}

	events, err := d.JobEvents(ctx, j.ID)
	if err != nil {
		t.Fatalf("JobEvents: %v", err)
	}
	want := []struct {
		typ      lifecycle.EventType
		from, to lifecycle.Status
		seq      int64
		actor    string
	}{
		{lifecycle.EventEnqueued, "", lifecycle.StatusQueued, 1, "client"},
		{lifecycle.EventClaimed, lifecycle.StatusQueued, lifecycle.StatusClaimed, 2, "worker:w1"},
		{lifecycle.EventStarted, lifecycle.StatusClaimed, lifecycle.StatusRunning, 3, "worker:w1"},
		// seq 4 was the heartbeat: it bumps rev without an event.
		{lifecycle.EventSucceeded, lifecycle.StatusRunning, lifecycle.StatusSucceeded, 5, "worker:w1"},
	}
	if len(events) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(events), events, len(want))
	}
	for i, w := range want {
		e := events[i]
		if e.Type != w.typ || e.From != w.from || e.To != w.to || e.Seq != w.seq || e.Actor != w.actor {
			t.Errorf("event %d = %s %q→%s seq %d actor %q, want %s %q→%s seq %d actor %q",
				i, e.Type, e.From, e.To, e.Seq, e.Actor, w.typ, w.from, w.to, w.seq, w.actor)
		}
	}
	if events[3].RequestID != "req-1" || !events[3].At.Equal(t0.Add(3*time.Second)) {
		t.Errorf("succeeded event = %+v, want request_id req-1 at t0+3s", events[3])
	}
	if err := lifecycle.CheckHistory(events); err != nil {
		t.Errorf("CheckHistory: %v", err)
	}
}

func TestInsertManyTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openTest(t)

	insertInTx := func(key string, commit bool) int64 {
		t.Helper()
		tx, err := d.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatalf("BeginTx: %v", err)
		}
		p := params("tx")
		p.IdempotencyKey = key
		res, err := d.JobInsertManyTx(ctx, tx, []driver.InsertParams{p})
		if err != nil {
			tx.Rollback()
			t.Fatalf("JobInsertManyTx: %v", err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatalf("end tx: %v", err)
		}
		return res[0].Job.ID
	}

	committed := insertInTx("kept", true)
	if j, err := d.JobGet(ctx, committed); err != nil || j.IdempotencyKey != "kept" {
		t.Fatalf("JobGet(committed) = %+v, %v", j, err)
	}
	rolledBack := insertInTx("dropped", false)
	if _, err := d.JobGet(ctx, rolledBack); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("JobGet(rolled back) err = %v, want ErrNotFound", err)
	}
	if _, err := d.JobEvents(ctx, rolledBack); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("JobEvents(rolled back) err = %v, want ErrNotFound", err)
	}
	// The rolled-back key is free again; the committed one is taken.
	if id := insertInTx("dropped", true); id == committed {
		t.Fatalf("re-insert of a rolled-back key returned the committed job")
	}
	res, err := d.JobInsertMany(ctx, []driver.InsertParams{func() driver.InsertParams { p := params("tx"); p.IdempotencyKey = "kept"; return p }()})
	if err != nil || !res[0].Existing || res[0].Job.ID != committed {
		t.Fatalf("insert of a committed key = %+v, %v; want the existing job %d", res, err, committed)
	}

	if _, err := d.JobInsertManyTx(ctx, "not a tx", nil); err == nil {
		t.Fatal("JobInsertManyTx with a string succeeded, want an error naming the type")
	}
}

func TestInsertManyDuplicateKeysInBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openTest(t)
	a, b := params("q"), params("q")
	a.IdempotencyKey, b.IdempotencyKey = "same", "same"
	b.Priority = 5
	res, err := d.JobInsertMany(ctx, []driver.InsertParams{a, b})
	if err != nil {
		t.Fatalf("JobInsertMany: %v", err)
	}
	if res[0].Existing || !res[1].Existing || res[0].Job.ID != res[1].Job.ID || res[1].Job.Priority != 0 {
		t.Fatalf("results = %+v %+v, want the first job twice, the second marked Existing", res[0], res[1])
	}
}

// A lock row that a migrator of an earlier version left when it was killed
// (it held every process on the file for its ten-minute lease) holds up
// nothing: an up-to-date file is left alone, and one a version behind is
// migrated at once (helper-34's F1b, then helper-2's: a migrator killed
// part-way).
func TestMigrateIgnoresALeftLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openTest(t)
	// The table and row a killed migrator of an earlier version leaves.
	if _, err := d.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS drover_migrate_lock (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at INTEGER NOT NULL);
		INSERT INTO drover_migrate_lock (name, holder, expires_at) VALUES ('migrate', 'killed', ?)`,
		time.Now().Add(10*time.Minute).UnixMicro()); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := d.MigrateUp(short); err != nil {
		t.Fatalf("MigrateUp of an up-to-date file with a left lock row: %v, want nil at once", err)
	}
	st, err := d.MigrateStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stepDown(t, d)
	if err := d.MigrateUp(short); err != nil {
		t.Fatalf("MigrateUp of a file a version behind, with a left lock row: %v, want it migrated at once", err)
	}
	if got, err := d.MigrateStatus(ctx); err != nil || got.Dirty || got.Current != st.Latest() {
		t.Fatalf("after MigrateUp: %+v, %v; want version %d, clean", got, err, st.Latest())
	}
}

// Migrators on one file, in one process or several, run one after another:
// each file ends at the latest version, clean, whoever applied what.
func TestConcurrentMigrateUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "drover.db")
	const n = 6
	drivers := make([]*Driver, n)
	for i := range drivers {
		d, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		drivers[i] = d
	}
	errs := make(chan error, n)
	for _, d := range drivers {
		go func() { errs <- d.MigrateUp(ctx) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("MigrateUp: %v", err)
		}
	}
	st, err := drivers[0].MigrateStatus(ctx)
	if err != nil || st.Dirty || st.Current != st.Latest() {
		t.Fatalf("after %d concurrent MigrateUps: %+v, %v; want the latest version, clean", n, st, err)
	}
}

// The DLQ purge deletes in batches, each its own transaction, so the one
// writer is not held for the whole purge: one transaction over 1.44M failed
// jobs held it for 9 s, and jobs running in other processes lost their leases
// (helper-34). Batches of 2 over 5 failed jobs of a queue delete all 5 and
// nothing else.
func TestDLQPurgeInBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openTest(t)
	d.purgeBatch = 2
	failed := func(queue string) int64 {
		t.Helper()
		p := params(queue)
		p.MaxAttempts = 1
		res, err := d.JobInsertMany(ctx, []driver.InsertParams{p})
		if err != nil {
			t.Fatal(err)
		}
		js, err := d.JobClaim(ctx, driver.ClaimParams{ID: res[0].Job.ID, Owner: "w", LeaseDuration: time.Minute, Start: true})
		if err != nil || len(js) != 1 {
			t.Fatalf("claim: %v, %v", js, err)
		}
		j := js[0]
		if _, err := d.JobFail(ctx, driver.FailParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken}, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	var purged []int64
	for range 5 {
		purged = append(purged, failed("q"))
	}
	other := failed("r")
	if n, err := d.JobDLQPurge(ctx, driver.DLQPurgeParams{Queue: "q"}); err != nil || n != 5 {
		t.Fatalf("JobDLQPurge(q) in batches of 2 = %d, %v; want 5", n, err)
	}
	for _, id := range purged {
		if _, err := d.JobGet(ctx, id); !errors.Is(err, driver.ErrNotFound) {
			t.Errorf("job %d after the purge: %v, want ErrNotFound", id, err)
		}
	}
	if _, err := d.JobGet(ctx, other); err != nil {
		t.Errorf("the other queue's failed job after the purge: %v, want it kept", err)
	}
	if n, err := d.JobDLQPurge(ctx, driver.DLQPurgeParams{}); err != nil || n != 1 {
		t.Errorf("JobDLQPurge(all) = %d, %v; want 1", n, err)
	}
}

// A migration and the version row that records it commit together: a
// migration that fails (or a process killed during one) leaves the file at the
// version before it, clean, and the next MigrateUp applies it. golang-migrate's
// Up marked the version dirty first, in a transaction of its own, and every
// process then refused the file (helper-34's F1a).
func TestMigrationFailureLeavesTheVersionClean(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openTest(t)
	st, err := d.MigrateStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	latest := st.Latest()
	migrateTo(t, d, 7)
	// Migration 008 edits drover_jobs's definition in place, and fails when
	// that definition is not the one it knows: here a space.
	const known, respelled = "('pending','queued'", "('pending', 'queued'"
	editJobsSQL(t, d, known, respelled)
	if err := d.MigrateUp(ctx); err == nil || !strings.Contains(err.Error(), "drover_jobs_status_known_rewritten") {
		t.Fatalf("MigrateUp over a respelled CHECK: %v; want the migration's guard to fail it", err)
	}
	if st, err := d.MigrateStatus(ctx); err != nil || st.Dirty || st.Current != 7 {
		t.Fatalf("after the failed migration: %+v, %v; want version 7, clean", st, err)
	}
	if s := tableSQL(t, d); !strings.Contains(s, respelled) {
		t.Fatalf("after the failed migration drover_jobs is %s; want it as it was", s)
	}
	editJobsSQL(t, d, respelled, known)
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatalf("MigrateUp once the definition is back: %v", err)
	}
	if st, err := d.MigrateStatus(ctx); err != nil || st.Dirty || st.Current != latest {
		t.Fatalf("after the retried migration: %+v, %v; want version %d, clean", st, err, latest)
	}
}

// migrateTo moves the file to version v, up or down, through golang-migrate.
func migrateTo(t *testing.T, d *Driver, v uint) {
	t.Helper()
	m, src, err := d.migrator()
	if err != nil {
		t.Fatal(err)
	}
	err = m.Migrate(v)
	src.Close()
	if err != nil {
		t.Fatalf("migrate to %d: %v", v, err)
	}
}

// stepDown undoes the file's last migration, through golang-migrate's down step.
func stepDown(t *testing.T, d *Driver) {
	t.Helper()
	m, src, err := d.migrator()
	if err != nil {
		t.Fatal(err)
	}
	err = m.Steps(-1)
	src.Close()
	if err != nil {
		t.Fatalf("one step down: %v", err)
	}
}
