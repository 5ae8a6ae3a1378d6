package sqlitedriver

import (
	"context"
	"database/sql"
	"strings"
	"testing"
)

// The statements a claim and QueuesReady run to find jobs are probes and
// ranges of the claim index, never scans: a range on run_at that stops at
// now, so the jobs a queue holds for later are not read (a claim of an idle
// queue beside 100k scheduled jobs took 50 ms, BenchmarkClaimPastScheduledJobs;
// now 0.6 ms, its commits included). QueuesReady may sort its queues.
func TestClaimPlansAreIndexRanges(t *testing.T) {
	t.Parallel()
	d := openTest(t)
	ctx := context.Background()
	for _, tc := range []struct {
		query string
		args  []any
		want  []string // in the plan's details
	}{
		{"ClaimCandidatesInQueue", []any{sql.Named("queue", "q"), sql.Named("now", 1), sql.Named("limit", 10)}, []string{
			"SEARCH drover_jobs USING INDEX drover_jobs_claim_idx (queue=? AND priority>?)",
			"SEARCH j USING INDEX drover_jobs_claim_idx (queue=? AND priority=? AND run_at<?)",
		}},
		{"QueuesReady", []any{sql.Named("now", 1)}, []string{
			"SEARCH drover_jobs USING INDEX drover_jobs_claim_idx (queue>?)",
			"SEARCH drover_jobs USING INDEX drover_jobs_claim_idx (queue=? AND priority>?)",
			"SEARCH j USING INDEX drover_jobs_claim_idx (queue=? AND priority=? AND run_at<?)",
		}},
		// Retention's read: its finished_at < :before implies the finished
		// index's WHERE finished_at IS NOT NULL (migration 008).
		{"FinishedBefore", []any{sql.Named("before", 1), sql.Named("limit", 10)}, []string{
			"SEARCH drover_jobs USING INDEX drover_jobs_finished_idx (finished_at<?)",
		}},
	} {
		rows, err := d.read.QueryContext(ctx, "EXPLAIN QUERY PLAN "+queries.Get(tc.query), tc.args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatalf("%s: %v", tc.query, err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		got := strings.Join(plan, "; ")
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s plan = %q; want %q in it", tc.query, got, w)
			}
		}
		// The CTEs' own rows are scanned, and sorted answers of at most
		// limit rows; drover_jobs never is.
		if strings.Contains(got, "SCAN drover_jobs") || strings.Contains(got, "SCAN j") {
			t.Errorf("%s plan = %q; want no scan of drover_jobs", tc.query, got)
		}
	}
}
