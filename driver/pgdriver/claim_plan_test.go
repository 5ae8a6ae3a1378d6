package pgdriver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/internal/testdb"
)

// The single-queue claim is planned once per connection (claimPool). On a table
// of one row a planner prefers a sequential scan, and a generic plan built then
// would keep it at millions of rows. The claims pool's sessions must still plan
// index scans; a session without its guard (enable_seqscan) shows that the
// guard is what does it.
func TestClaimPlanUsesIndexesOnATinyTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.PostgresURL(t)
	d, err := pgdriver.New(ctx, url, pgdriver.Options{})
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
	if _, err := d.Pool().Exec(ctx, "ANALYZE drover_jobs"); err != nil {
		t.Fatal(err)
	}

	plan := func(t *testing.T, p *pgxpool.Pool) string {
		t.Helper()
		conn, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		sql := strings.TrimSuffix(strings.TrimSpace(pgdriver.ClaimQueueSQL()), ";")
		if _, err := conn.Exec(ctx, "PREPARE claim_plan(text, int, text, bigint, timestamptz, text, bool) AS "+sql); err != nil {
			t.Fatal(err)
		}
		defer conn.Exec(ctx, "DEALLOCATE claim_plan") //nolint:errcheck // the connection is released next
		var lines []string
		rows, err := conn.Query(ctx, "EXPLAIN (COSTS OFF) EXECUTE claim_plan('q', 10, 'w', 30000000, NULL, '', true)")
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

	got := plan(t, d.ClaimsPool())
	if strings.Contains(got, "Seq Scan on drover_jobs") || !strings.Contains(got, "drover_jobs_claim_idx") {
		t.Errorf("the claims pool's generic plan on a one-row table:\n%s\nwant index scans of drover_jobs (the claim index), no sequential scan", got)
	}

	// The control: the same generic plan without the guard.
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	bare, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if got := plan(t, bare); !strings.Contains(got, "Seq Scan on drover_jobs") {
		t.Logf("without enable_seqscan = off the generic plan did not scan sequentially here either:\n%s", got)
	}
}
