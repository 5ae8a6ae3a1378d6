package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestBacklogTablesApart runs the backlog workload on a real PostgreSQL, on
// Drover and on River: every size gets a table of its own, seeded to exactly
// its size before any job is measured (counted when the workload settles the
// database, after the last seed), every size reports its jobs with 0 lost and
// 0 twice, and the twins' schemas are gone afterwards.
func TestBacklogTablesApart(t *testing.T) {
	dbURL := harnessDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := ensureDatabase(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	admin, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	sizes := []int64{300, 40, 2000} // out of order: the workload sorts them
	o := opts{backlog: sizes, backlogJobs: 3, backlogFuture: 0.1, stall: 30 * time.Second}
	for _, c := range []struct {
		sys   system
		table string
	}{
		{newDroverPG(admin, dbURL, 0, nil, knobs{concurrency: 10}), "drover_jobs"},
		{newRiver(admin, dbURL, 0, nil, riverKnobs{maxWorkers: 10, fetchCooldown: 2 * time.Millisecond, fetchPoll: 20 * time.Millisecond}), "river_job"},
	} {
		t.Run(c.sys.name(), func(t *testing.T) {
			s := c.sys
			defer s.close()
			if err := s.reset(ctx); err != nil {
				t.Fatal(err)
			}
			base := map[string]string{"drover": "bench_drover", "river": "bench_river"}[s.name()]
			want := map[string]int64{base: 40, base + "_300": 300, base + "_2000": 2000}
			settled := 0
			settle := func() error {
				settled++
				for schema, n := range want {
					var got int64
					q := "SELECT count(*) FROM " + pgx.Identifier{schema, c.table}.Sanitize()
					if err := admin.QueryRow(ctx, q).Scan(&got); err != nil {
						return fmt.Errorf("%s: %w", q, err)
					}
					if got != n {
						t.Errorf("%s holds %d rows when the backlog settles, want %d", schema, got, n)
					}
				}
				return nil
			}
			rs := backlog(ctx, s, o, settle)
			if settled != 1 {
				t.Errorf("the workload settled the database %d times, want once, after the last seed", settled)
			}
			if len(rs) != 3 {
				t.Fatalf("%d results, want one a size: %+v", len(rs), rs)
			}
			for i, param := range []string{"40 rows", "300 rows", "2000 rows"} {
				r := rs[i]
				if r.Param != param || r.Error != "" || r.Jobs != 3 || r.StartP50 <= 0 || r.FinishP50 <= 0 || r.Lost != 0 || r.Dup != 0 {
					t.Errorf("result %d: %s, error %q, %d jobs, start p50 %.2f ms, finish p50 %.2f ms, lost %d, dup %d; want %s, no error, 3 jobs, both p50s and 0 / 0",
						i, r.Param, r.Error, r.Jobs, r.StartP50, r.FinishP50, r.Lost, r.Dup, param)
				}
			}
			var left []string
			rows, err := admin.Query(ctx, "SELECT nspname FROM pg_namespace WHERE nspname LIKE $1 || '\\_%' ORDER BY 1", base)
			if err != nil {
				t.Fatal(err)
			}
			if left, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				t.Fatal(err)
			}
			if len(left) != 0 {
				t.Errorf("the twins' schemas %v are left after the workload", left)
			}
		})
	}
}
