package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// Migration 008 rewrites drover_jobs's status CHECK in place and remakes the
// finished index. Up and down keep every row as it was, the AUTOINCREMENT
// counter past a deleted last job (an id is never handed out twice), and the
// indexes.
func TestMigration008KeepsRowsAndCounter(t *testing.T) {
	f := newFixture(t) // runs in parallel
	ctx := f.ctx
	for range 6 {
		f.enqueue(nil)
	}
	jobs := f.claim(driver.ClaimParams{Limit: 3, Start: true})
	if len(jobs) != 3 {
		t.Fatalf("claimed %d, want 3", len(jobs))
	}
	if _, err := f.d.JobComplete(ctx, driver.CompleteParams{FenceParams: fp(jobs[0], f.at(time.Second)), Result: []byte(`{"ok":1}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.d.JobFail(ctx, driver.FailParams{FenceParams: fp(jobs[1], f.at(time.Second)), Error: "boom", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	last := f.enqueue(nil).ID
	if _, err := f.d.write.ExecContext(ctx, "DELETE FROM drover_jobs WHERE id = ?", last); err != nil {
		t.Fatal(err)
	}
	migrateTo(t, f.d, 7) // the list forms
	if s := tableSQL(t, f.d); !strings.Contains(s, "status IN ('pending','queued'") {
		t.Fatalf("at 007 drover_jobs is %s; want the IN list", s)
	}
	rows, seq := jobRows(t, f.d), sequence(t, f.d)
	if seq != last {
		t.Fatalf("sqlite_sequence = %d, want the deleted last id %d", seq, last)
	}

	migrateTo(t, f.d, 8)
	if s := tableSQL(t, f.d); strings.Contains(s, "status IN ('pending'") || !strings.Contains(s, "status = 'queued' OR status = 'running'") {
		t.Fatalf("at 008 drover_jobs is %s; want the comparison chain", s)
	}
	same(t, "after 008 up", jobRows(t, f.d), rows, sequence(t, f.d), seq)
	wantIndexes(t, f.d, "drover_jobs_finished_idx ON drover_jobs (finished_at) WHERE finished_at IS NOT NULL")

	migrateTo(t, f.d, 7)
	if s := tableSQL(t, f.d); !strings.Contains(s, "status IN ('pending','queued'") {
		t.Fatalf("after 008 down drover_jobs is %s; want the IN list", s)
	}
	same(t, "after 008 down", jobRows(t, f.d), rows, sequence(t, f.d), seq)
	wantIndexes(t, f.d, "drover_jobs_finished_idx ON drover_jobs (finished_at) WHERE status IN ('succeeded','failed','canceled','skipped')")

	if err := f.d.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	if id := f.enqueue(nil).ID; id <= last {
		t.Fatalf("a job enqueued after the rebuilds has id %d; want past the deleted %d", id, last)
	}
}

// Migration 008 edits drover_jobs's definition in place: what an operator
// built on the table (a view, an index, a trigger) is still there and works
// after 008 up and after 008 down. A rebuild of the table dropped the index and
// the trigger, and a view on the table failed the rename (helper-4).
func TestMigration008KeepsOperatorObjects(t *testing.T) {
	f := newFixture(t) // runs in parallel
	migrateTo(t, f.d, 7)
	for _, q := range []string{
		"CREATE VIEW ops_failed AS SELECT id, queue, error FROM drover_jobs WHERE status = 'failed'",
		"CREATE INDEX ops_kind_idx ON drover_jobs (kind)",
		"CREATE TABLE ops_audit (id INTEGER, status TEXT)",
		"CREATE TRIGGER ops_trg AFTER UPDATE OF status ON drover_jobs BEGIN INSERT INTO ops_audit VALUES (new.id, new.status); END",
	} {
		if _, err := f.d.write.ExecContext(f.ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// check sees the objects, and that the view and the trigger work on the
	// job's transition to failed, which fail makes.
	check := func(when string, fail func() int64) {
		t.Helper()
		var n int
		if err := f.d.write.QueryRow("SELECT count(*) FROM sqlite_schema WHERE name IN ('ops_failed', 'ops_kind_idx', 'ops_audit', 'ops_trg')").Scan(&n); err != nil || n != 4 {
			t.Fatalf("%s: %d of the operator's 4 objects, %v", when, n, err)
		}
		id := fail()
		var audits, failed int
		if err := f.d.write.QueryRow("SELECT count(*) FROM ops_audit WHERE id = ?", id).Scan(&audits); err != nil || audits == 0 {
			t.Errorf("%s: the trigger logged %d changes of job %d (%v); want some", when, audits, id, err)
		}
		if err := f.d.write.QueryRow("SELECT count(*) FROM ops_failed WHERE id = ?", id).Scan(&failed); err != nil || failed != 1 {
			t.Errorf("%s: the view shows failed job %d %d times (%v); want once", when, id, failed, err)
		}
	}
	if err := f.d.MigrateUp(f.ctx); err != nil {
		t.Fatalf("MigrateUp with an operator's view, index and trigger: %v", err)
	}
	queued := f.enqueue(nil).ID
	check("after 008 up", func() int64 {
		j := f.enqueue(nil)
		jobs := f.claim(driver.ClaimParams{ID: j.ID, Start: true})
		if len(jobs) != 1 {
			t.Fatalf("claimed %v, want job %d", jobs, j.ID)
		}
		if _, err := f.d.JobFail(f.ctx, driver.FailParams{FenceParams: fp(jobs[0], f.at(time.Second)), Error: "boom", Permanent: true}); err != nil {
			t.Fatal(err)
		}
		return j.ID
	})
	// This driver runs on the latest schema only: at 007 the job fails by hand.
	migrateTo(t, f.d, 7)
	check("after 008 down", func() int64 {
		if _, err := f.d.write.ExecContext(f.ctx, "UPDATE drover_jobs SET status = 'failed', error = 'boom', finished_at = 1 WHERE id = ?", queued); err != nil {
			t.Fatal(err)
		}
		return queued
	})
}

// No CHECK or index predicate of drover_jobs makes SQLite build a lookup table
// for each row an INSERT or UPDATE writes (OpenEphemeral in the statement's
// program): migration 007's schema built three for an UPDATE of the status.
// It also shows the migrating connection runs the new definition at once.
func TestRowWritesBuildNoLookupTables(t *testing.T) {
	t.Parallel()
	d := openTest(t)
	for _, q := range []string{
		"UPDATE drover_jobs SET status = ?, finished_at = 1 WHERE id = 1",
		"INSERT INTO drover_jobs (kind, queue, status, run_at, max_attempts, created_at) VALUES ('k', 'q', ?, 0, 1, 0)",
	} {
		if n := ephemerals(t, d, q, "queued"); n != 0 {
			t.Errorf("%s: %d lookup tables built; want none", q, n)
		}
	}
	migrateTo(t, d, 7)
	if n := ephemerals(t, d, "UPDATE drover_jobs SET status = ?, finished_at = 1 WHERE id = 1", "queued"); n == 0 {
		t.Errorf("at 007, an UPDATE of the status built no lookup table; the check above cannot fail")
	}
}

// ephemerals counts the OpenEphemeral instructions of q's program.
func ephemerals(t *testing.T, d *Driver, q string, args ...any) int {
	t.Helper()
	_, rows := allRows(t, d, "EXPLAIN "+q, args...)
	n := 0
	for _, r := range rows {
		if fmt.Sprint(r[1]) == "OpenEphemeral" { // addr, opcode, p1, ...
			n++
		}
	}
	return n
}

// allRows answers q's columns and every row's values, on the writer.
func allRows(t *testing.T, d *Driver, q string, args ...any) ([]string, [][]any) {
	t.Helper()
	rows, err := d.write.Query(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return cols, out
}

// The rewritten CHECK admits exactly the statuses the lifecycle knows.
func TestStatusCheckAdmitsTheLifecycleStatuses(t *testing.T) {
	f := newFixture(t) // runs in parallel
	id := f.enqueue(nil).ID
	set := func(s string) error {
		tx, err := f.d.write.BeginTx(f.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		// The other CHECKs ask for a lease, a result or an error with some statuses.
		_, err = tx.ExecContext(f.ctx, `UPDATE drover_jobs SET status = :s,
			owner = CASE WHEN :s IN ('claimed','running') THEN 'w' END,
			lease_token = CASE WHEN :s IN ('claimed','running') THEN 't' END,
			lease_expires_at = CASE WHEN :s IN ('claimed','running') THEN 1 END,
			result = CASE WHEN :s = 'succeeded' THEN 'null' END,
			error = CASE WHEN :s = 'failed' THEN 'x' END
			WHERE id = :id`, sql.Named("s", s), sql.Named("id", id))
		return err
	}
	for _, s := range lifecycle.Statuses {
		if err := set(string(s)); err != nil {
			t.Errorf("status %q: %v; want it admitted", s, err)
		}
	}
	for _, s := range []string{"bogus", "Queued", "queued ", "", "succeeded,failed"} {
		if err := set(s); err == nil || !strings.Contains(err.Error(), "drover_jobs_status_known") {
			t.Errorf("status %q: %v; want the drover_jobs_status_known CHECK to refuse it", s, err)
		}
	}
}

// editJobsSQL replaces from with to in drover_jobs's stored definition, as an
// operator's hand edit would.
func editJobsSQL(t *testing.T, d *Driver, from, to string) {
	t.Helper()
	ctx := context.Background()
	conn, err := d.write.Conn(ctx) // the one writer connection, held to the end of the edit
	if err != nil {
		t.Fatal(err)
	}
	var v int
	if err := conn.QueryRowContext(ctx, "PRAGMA schema_version").Scan(&v); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	for _, q := range []string{
		"PRAGMA writable_schema = ON",
		"UPDATE sqlite_schema SET sql = replace(sql, '" + strings.ReplaceAll(from, "'", "''") + "', '" + strings.ReplaceAll(to, "'", "''") + "') WHERE type = 'table' AND name = 'drover_jobs'",
		fmt.Sprintf("PRAGMA schema_version = %d", v+1),
		"PRAGMA writable_schema = RESET",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			conn.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	if s := tableSQL(t, d); !strings.Contains(s, to) {
		t.Fatalf("drover_jobs is %s; want %q in it", s, to)
	}
}

func tableSQL(t *testing.T, d *Driver) string {
	t.Helper()
	var s string
	if err := d.write.QueryRow("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'drover_jobs'").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// jobRows answers every row of drover_jobs, each column printed, in id order.
func jobRows(t *testing.T, d *Driver) []string {
	t.Helper()
	cols, rows := allRows(t, d, "SELECT * FROM drover_jobs ORDER BY id")
	out := make([]string, len(rows))
	for k, vals := range rows {
		var b strings.Builder
		for i, v := range vals {
			fmt.Fprintf(&b, "%s=%v ", cols[i], v)
		}
		out[k] = b.String()
	}
	return out
}

func sequence(t *testing.T, d *Driver) int64 {
	t.Helper()
	var seq int64
	if err := d.write.QueryRow("SELECT seq FROM sqlite_sequence WHERE name = 'drover_jobs'").Scan(&seq); err != nil {
		t.Fatal(err)
	}
	return seq
}

func same(t *testing.T, when string, rows, wantRows []string, seq, wantSeq int64) {
	t.Helper()
	if strings.Join(rows, "\n") != strings.Join(wantRows, "\n") {
		t.Errorf("%s: rows\n%s\nwant\n%s", when, strings.Join(rows, "\n"), strings.Join(wantRows, "\n"))
	}
	if seq != wantSeq {
		t.Errorf("%s: sqlite_sequence = %d, want %d", when, seq, wantSeq)
	}
}

// wantIndexes checks that drover_jobs has its seven indexes, one of them as finished says.
func wantIndexes(t *testing.T, d *Driver, finished string) {
	t.Helper()
	rows, err := d.write.Query("SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'drover_jobs' ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	found := false
	for rows.Next() {
		var name, s string
		if err := rows.Scan(&name, &s); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		found = found || strings.HasSuffix(s, finished)
	}
	want := "drover_jobs_claim_idx drover_jobs_dlq_idx drover_jobs_finished_idx drover_jobs_idempotency_key_idx drover_jobs_lease_idx drover_jobs_retry_of_idx drover_jobs_workflow_idx"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("indexes of drover_jobs: %s; want %s", got, want)
	}
	if !found {
		t.Errorf("no index of drover_jobs is %q", finished)
	}
}
