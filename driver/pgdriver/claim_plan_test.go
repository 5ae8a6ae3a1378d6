package pgdriver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/internal/testdb"
)

// The single-queue claim is prepared and planned once per connection
// (claimPlanSettings). On a table of one row a planner prefers a sequential
// scan, and a generic plan built then would keep it at millions of rows. The
// driver's own claim must run the generic plan, and under the claim's settings
// that plan must be index scans; the same statement without the settings shows
// that they are what does it.
func TestClaimPlanUsesIndexesOnATinyTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, d := oneSession(t)
	if _, err := d.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE drover_jobs"); err != nil {
		t.Fatal(err)
	}
	for want := 1; want >= 0; want-- { // the first takes the job, the second finds none
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "w", Start: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != want {
			t.Fatalf("claimed %d jobs, want %d", len(jobs), want)
		}
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	name, generic, custom := claimStatement(t, conn)
	if generic != 2 || custom != 0 {
		t.Errorf("the claim ran %d times with the generic plan and %d with a custom one, want 2 and 0", generic, custom)
	}

	if got := explainClaim(t, conn, name, pgdriver.ClaimPlanSettings); strings.Contains(got, "Seq Scan on drover_") ||
		!strings.Contains(got, "drover_ready_pkey") || len(unboundedIndexScans(got)) > 0 {
		t.Errorf("the claim's generic plan on a one-row table:\n%s\nwant index scans of drover_ready's key and of drover_jobs by id, "+
			"each bounded by a condition (unbounded: %q), no sequential scan", got, unboundedIndexScans(got))
	}

	// The control: the same statement's generic plan without the claim's settings.
	sql := strings.TrimSuffix(strings.TrimSpace(pgdriver.ClaimQueueSQL()), ";")
	if _, err := conn.Exec(ctx, "PREPARE claim_bare(text, int, text, bigint, timestamptz, text, bool, integer, timestamptz, bigint) AS "+sql); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DEALLOCATE claim_bare") //nolint:errcheck // the pool closes next
	if got := explainClaim(t, conn, "claim_bare", "SET LOCAL plan_cache_mode = force_generic_plan"); !strings.Contains(got, "Seq Scan on drover_jobs") {
		t.Logf("without the claim's settings the generic plan did not scan sequentially here either:\n%s", got)
	}
}

// Every ANALYZE of drover_ready makes each session plan the claim again at its
// next call, on the statistics it left. Where those count next to no ready
// rows, as after ANALYZE sampled a drained queue (no live rows, no all-visible
// pages), a plan with only sequential scans ruled out read drover_ready by
// bitmap heap scans estimated at one row and sorted what they found for each
// LIMIT. In a continuous run such a plan, caught by auto_explain, sorted every
// ready job, 50k of them, on each claim (160 ms against a median of 12), and
// the rate halved for a minute at a time, from one ANALYZE to the next. With
// bitmap scans ruled out as well the plan walks drover_ready's key in order,
// whatever the statistics.
func TestClaimPlanWalksTheKeyAfterADrainedQueueWasAnalyzed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, d := oneSession(t)
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	claimAll := func(want int) {
		t.Helper()
		got := 0
		for {
			jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1000, Owner: "w", Start: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) == 0 {
				break
			}
			got += len(jobs)
		}
		if got != want {
			t.Fatalf("claimed %d jobs, want %d", got, want)
		}
	}

	// The queue is analyzed while full, drained, and analyzed again: its
	// statistics keep the full queue's columns but count no row. Autovacuum
	// stays off the table, so that only the test's ANALYZEs make them.
	exec("ALTER TABLE drover_ready SET (autovacuum_enabled = false)")
	insertWaiting(t, d, 8000)
	exec("ANALYZE drover_ready")
	claimAll(8000)
	exec("ANALYZE drover_ready")
	var tuples float64
	var allVisible int
	if err := pool.QueryRow(ctx, "SELECT reltuples, relallvisible FROM pg_class WHERE oid = 'drover_ready'::regclass").
		Scan(&tuples, &allVisible); err != nil {
		t.Fatal(err)
	}
	if tuples != 0 || allVisible != 0 {
		t.Fatalf("drover_ready's statistics after the drain: %v rows, %d all-visible pages; the test needs 0 and 0", tuples, allVisible)
	}
	// The next claims plan again, on those statistics, under the claim's settings.
	insertWaiting(t, d, 2000)
	claimAll(2000)

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	name, _, custom := claimStatement(t, conn)
	if custom != 0 {
		t.Errorf("the claim ran %d times with a custom plan, want 0", custom)
	}
	got := explainClaim(t, conn, name, pgdriver.ClaimPlanSettings)
	if strings.Contains(got, "Bitmap Heap Scan on drover_ready") || len(sortsOf(got, "drover_ready")) > 0 ||
		!strings.Contains(got, "drover_ready_pkey") || len(unboundedIndexScans(got)) > 0 {
		t.Errorf("the claim's generic plan on the statistics of a drained queue:\n%s\nwant drover_ready read in its key's order "+
			"(sorts of its rows: %q), no bitmap heap scan of it, every index scan bounded (unbounded: %q)",
			got, sortsOf(got, "drover_ready"), unboundedIndexScans(got))
	}
}

// claimStatement answers the claim's prepared statement on conn, and how many
// times it ran with the generic plan and with a custom one.
func claimStatement(t *testing.T, conn *pgxpool.Conn) (name string, generic, custom int64) {
	t.Helper()
	err := conn.QueryRow(context.Background(), "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
		pgdriver.ClaimQueueSQL()).Scan(&name, &generic, &custom)
	if err != nil {
		t.Fatalf("the claim's prepared statement on the pool's one session: %v", err)
	}
	return name, generic, custom
}

// explainClaim answers the plan (EXPLAIN COSTS OFF) of the claim prepared as
// stmt on conn, run under settings in a transaction as the claim is. (EXPLAIN
// outside one could not rely on the cached plan: DDL anywhere in the database,
// such as another test's migration, can reset every cached plan, and the next
// execution plans again under the settings it runs with.)
func explainClaim(t *testing.T, conn *pgxpool.Conn, stmt, settings string) string {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // only read
	if _, err := tx.Exec(ctx, settings); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) EXECUTE "+stmt+"('q', 10, 'w', 30000000, NULL, '', true, 0, NULL, 0)")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// A batch completion looks its jobs up by primary key whatever the statistics
// say, and is planned once per connection. Planned with its values on each
// call, it once read the lease index (its predicate then matched the
// completion's status check) once per input row when the statistics said no
// job was leased while hundreds were: ANALYZEd while all jobs waited, then 600
// claimed, O(leased jobs × batch). Without its plan settings
// (completePlanSettings) it walks the whole table, or the whole primary key,
// once per input row. With them there is one shape left, an index lookup of
// the ids feeding a hash join, so the driver keeps one generic plan: here it is
// built on a one-row table, looked at after the table has grown to 20k jobs,
// and again after statistics taken while none was leased.
func TestCompletionPlanIgnoresStaleLeaseStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, d := oneSession(t)
	complete := func(jobs []*driver.Job) {
		t.Helper()
		for i, err := range d.JobCompleteManyErrs(ctx, completions(jobs)) {
			if err != nil {
				t.Fatalf("complete job %d: %v", jobs[i].ID, err)
			}
		}
	}
	claim := func(n int) []*driver.Job {
		t.Helper()
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: n, Owner: "w", Start: true})
		if err != nil || len(jobs) != n {
			t.Fatalf("claimed %d (%v), want %d", len(jobs), err, n)
		}
		return jobs
	}

	// The plan is built on a table of one job.
	insertWaiting(t, d, 1)
	if _, err := pool.Exec(ctx, "ANALYZE drover_jobs"); err != nil {
		t.Fatal(err)
	}
	complete(claim(1))
	// The pool's one session, which the driver waits for while a test holds it.
	acquire := func() *pgxpool.Conn {
		t.Helper()
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	plans := func() (name string, generic, custom int64) {
		t.Helper()
		conn := acquire()
		defer conn.Release()
		err := conn.QueryRow(ctx, "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
			pgdriver.CompleteManySQL()).Scan(&name, &generic, &custom)
		if err != nil {
			t.Fatalf("the completion's prepared statement on the pool's one session: %v", err)
		}
		return name, generic, custom
	}
	name, generic, custom := plans()
	if generic != 1 || custom != 0 {
		t.Errorf("the completion ran %d times with the generic plan and %d with a custom one, want 1 and 0", generic, custom)
	}

	// The plan under the completion's own settings, in a transaction as the
	// completion's (see TestClaimPlanUsesIndexesOnATinyTable on why).
	check := func(when string) {
		t.Helper()
		conn := acquire()
		defer conn.Release()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // only read
		if _, err := tx.Exec(ctx, pgdriver.CompletePlanSettings); err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) EXECUTE "+name+
			"(ARRAY[1]::bigint[], ARRAY[1]::int[], ARRAY['00000000-0000-0000-0000-000000000000']::uuid[], ARRAY['null'], ARRAY['r'], NULL)")
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		if !strings.Contains(plan, "$1") {
			t.Errorf("%s: the plan names no parameter, so it is not the generic one:\n%s", when, plan)
		}
		if strings.Contains(plan, "Seq Scan on drover_jobs") || strings.Contains(plan, "Nested Loop") ||
			!strings.Contains(plan, "drover_jobs_pkey") || !strings.Contains(plan, "Index Cond: (id = ANY ($1))") ||
			len(unboundedIndexScans(plan)) > 0 {
			t.Errorf("%s, the completion's plan:\n%s\nwant the UPDATE's jobs looked up by primary key (unbounded index scans: %q), "+
				"no nested loop, no sequential scan", when, plan, unboundedIndexScans(plan))
		}
	}
	check("on a one-row table")

	insertWaiting(t, d, 20_000)
	check("after the table grew to 20k jobs")
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE drover_jobs"); err != nil {
		t.Fatal(err)
	}
	jobs := claim(600)
	check("with 600 leased jobs the statistics do not know of")
	_, before, _ := plans() // the EXPLAINs above count as runs too
	complete(jobs[:500])
	if _, generic, custom := plans(); generic != before+1 || custom != 0 {
		t.Errorf("the completion of 500 ran %d times with the generic plan and %d with a custom one, want 1 and 0", generic-before, custom)
	}
}

// oneSession opens a migrated driver on a pool of one connection, so that the
// driver's statements and a test's look at the plans they left share a session.
func oneSession(t *testing.T) (*pgxpool.Pool, *pgdriver.Driver) {
	t.Helper()
	pool, d := driverOnPool(t, testdb.PostgresURL(t), func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	t.Cleanup(func() { _ = d.Close() })
	if err := d.MigrateUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pool, d
}

func completions(jobs []*driver.Job) []driver.CompleteParams {
	out := make([]driver.CompleteParams, len(jobs))
	for i, j := range jobs {
		out[i] = driver.CompleteParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, RequestID: "r"}}
	}
	return out
}

// unboundedIndexScans answers the index scans of plan (EXPLAIN COSTS OFF text)
// without an Index Cond: a walk of a whole index, which, repeated for each row
// of a join's other side, is a sequential scan in all but name.
func unboundedIndexScans(plan string) []string {
	var out []string
	lines := strings.Split(plan, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "Index Scan using") && !strings.Contains(l, "Index Only Scan using") {
			continue
		}
		if i+1 >= len(lines) || !strings.Contains(lines[i+1], "Index Cond:") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// sortsOf answers the sort nodes of plan (EXPLAIN COSTS OFF text) whose sort
// key names table: a sort of what a scan of it found, where the scan could
// have walked an index in order.
func sortsOf(plan, table string) []string {
	var out []string
	lines := strings.Split(plan, "\n")
	for i, l := range lines {
		node := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "->"))
		if node != "Sort" && !strings.HasPrefix(node, "Sort ") && !strings.HasPrefix(node, "Incremental Sort") {
			continue
		}
		if i+1 < len(lines) && strings.Contains(lines[i+1], "Key: "+table) {
			out = append(out, strings.TrimSpace(lines[i+1]))
		}
	}
	return out
}
