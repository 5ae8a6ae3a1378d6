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
	cfg, err := pgxpool.ParseConfig(testdb.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // the claim and the inspection below share the one session
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	d, err := pgdriver.NewFromPool(ctx, pool, pgdriver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
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
	var name string
	var generic, custom int64
	err = conn.QueryRow(ctx, "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
		pgdriver.ClaimQueueSQL()).Scan(&name, &generic, &custom)
	if err != nil {
		t.Fatalf("the claim's prepared statement on the pool's one session: %v", err)
	}
	if generic != 2 || custom != 0 {
		t.Errorf("the claim ran %d times with the generic plan and %d with a custom one, want 2 and 0", generic, custom)
	}

	// The plan under the claim's own settings, in a transaction as the claim's.
	// (EXPLAIN outside one could not rely on the cached plan: DDL anywhere in
	// the database, such as another test's migration, can reset every cached
	// plan, and the next execution plans again under the settings it runs with.)
	explain := func(stmt, settings string) string {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // only read
		if _, err := tx.Exec(ctx, settings); err != nil {
			t.Fatal(err)
		}
		var lines []string
		rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) EXECUTE "+stmt+"('q', 10, 'w', 30000000, NULL, '', true, 0, NULL, 0)")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	if got := explain(name, pgdriver.ClaimPlanSettings); strings.Contains(got, "Seq Scan on drover_") ||
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
	if got := explain("claim_bare", "SET LOCAL plan_cache_mode = force_generic_plan"); !strings.Contains(got, "Seq Scan on drover_jobs") {
		t.Logf("without the claim's settings the generic plan did not scan sequentially here either:\n%s", got)
	}
}

// A batch completion looks its jobs up by primary key even when the statistics
// say that no job is leased while hundreds are: ANALYZEd while all jobs waited,
// then 600 claimed. Planned with its values on each call, the completion read
// the lease index instead (its predicate then matched the completion's status
// check), once per input row: O(leased jobs × batch). Without its own plan
// settings (completePlanSettings) it now walks the whole table, or the whole
// primary key, once per input row; with them the ids are looked up by key.
func TestCompletionPlanIgnoresStaleLeaseStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	insertWaiting(t, d, 20_000)
	if _, err := d.Pool().Exec(ctx, "VACUUM ANALYZE drover_jobs"); err != nil {
		t.Fatal(err)
	}
	jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 600, Owner: "w", Start: true})
	if err != nil || len(jobs) != 600 {
		t.Fatalf("claimed %d (%v), want 600", len(jobs), err)
	}
	ids, attempts, tokens, results, reqs := []int64{}, []int32{}, []string{}, []string{}, []string{}
	for _, j := range jobs[:500] {
		ids, attempts, tokens = append(ids, j.ID), append(attempts, int32(j.Attempt)), append(tokens, j.LeaseToken)
		results, reqs = append(results, "null"), append(reqs, "r")
	}
	// As completeMany sends it: in one transaction with its plan settings,
	// planned with these values.
	for _, req := range []string{"", "r"} {
		for i := range reqs {
			reqs[i] = req
		}
		b := &pgx.Batch{}
		b.Queue(pgdriver.CompletePlanSettings)
		b.Queue("EXPLAIN (COSTS OFF) "+pgdriver.CompleteManySQL(), ids, attempts, tokens, results, reqs, nil)
		br := d.Pool().SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			t.Fatal(err)
		}
		rows, err := br.Query()
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if err := br.Close(); err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		if strings.Contains(plan, "drover_jobs_lease_idx") || strings.Contains(plan, "Seq Scan on drover_jobs") ||
			!strings.Contains(plan, "Index Scan using drover_jobs_pkey on drover_jobs\n") || len(unboundedIndexScans(plan)) > 0 {
			t.Errorf("request_id %q: the completion's plan with 500 leased jobs the statistics do not know of:\n%s\n"+
				"want the UPDATE's jobs looked up by primary key (unbounded index scans: %q), not by the lease index or a sequential scan",
				req, plan, unboundedIndexScans(plan))
		}
	}
	for i, err := range d.JobCompleteManyErrs(ctx, completions(jobs[:500])) {
		if err != nil {
			t.Fatalf("complete job %d: %v", jobs[i].ID, err)
		}
	}
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
