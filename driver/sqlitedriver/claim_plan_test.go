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
// now 0.6 ms, its commits included).
func TestClaimPlansAreIndexRanges(t *testing.T) {
	t.Parallel()
	d := openTest(t)
	ctx := context.Background()
	for _, tc := range []struct {
		query string
		args  []any
		want  string // in the plan's detail
	}{
		{"ClaimNextPriority", []any{sql.Named("queue", "q"), sql.Named("after", -1)},
			"SEARCH drover_jobs USING INDEX drover_jobs_claim_idx (queue=? AND priority>?)"},
		{"ClaimCandidatesAtPriority", []any{sql.Named("queue", "q"), sql.Named("priority", 0), sql.Named("now", 1), sql.Named("limit", 10)},
			"SEARCH drover_jobs USING INDEX drover_jobs_claim_idx (queue=? AND priority=? AND run_at<?)"},
		{"QueuesNextQueued", []any{sql.Named("after", "")},
			"SEARCH drover_jobs USING INDEX drover_jobs_claim_idx (queue>?)"},
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
		if !strings.Contains(got, tc.want) || strings.Contains(got, "SCAN") || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s plan = %q; want %q, and no scan or sort", tc.query, got, tc.want)
		}
	}
}
