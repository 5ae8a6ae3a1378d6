package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// newSplitSQLite is raw's worker (rawSys, the harness's claim loop, a
// goroutine a job and a batching completer) on split-row's layout
// (splitrow_test.go): an experiment, not a system of the harness.
func newSplitSQLite(dir string, k knobs) *rawSys {
	return &rawSys{label: "split-sqlite", k: k, store: &rawSQLiteSplit{rawSQLite: rawSQLite{path: filepath.Join(dir, "split.db")}}}
}

// BenchmarkSQLiteSplitHarness runs the harness's burn-down (its inserter, its
// tracker, raw's worker with the README run's knobs: 2,000 slots, claims of
// 1,000, completion batches of 500) on raw-sqlite, the baseline, on
// split-sqlite, raw's worker on a layout that keeps the guarantees with a narrow
// hot row, on raw-sqlite-row, raw's worker on Drover's row, and on
// drover-sqlite, Drover's worker and driver. Where
// BenchmarkSQLiteRowWidth times one goroutine's statements, this times them
// under the worker the table's figures come from, so split-sqlite's share of
// raw-sqlite is the most a queue on that layout could reach in the table.
//
//	go -C bench/compare test -run XXX -bench 'SQLiteSplitHarness/<name>$' -benchtime 1x .
func BenchmarkSQLiteSplitHarness(b *testing.B) {
	k := knobs{concurrency: 2000, claimBatch: 1000, completionBatch: 500}
	o := opts{jobs: 300_000, insertBatch: 1000, insertWorkers: 1, stall: time.Minute}
	systems := []func(string, knobs) system{
		func(dir string, k knobs) system { return newRawSQLite(dir, k) },
		func(dir string, k knobs) system { return newSplitSQLite(dir, k) },
		func(dir string, k knobs) system { return newRawSQLiteRow(dir, k) },
		func(dir string, k knobs) system { return newDroverSQLite(dir, k) },
	}
	for _, newSys := range systems {
		b.Run(newSys(b.TempDir(), k).name(), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				s := newSys(b.TempDir(), k)
				if err := s.reset(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				r := burnDown(context.Background(), s, o)
				b.StopTimer()
				s.close()
				if r.Error != "" || r.Lost != 0 || r.Dup != 0 || r.DBUnfinished != 0 {
					b.Fatalf("burn-down of %d: error %q, lost %d, dup %d, unfinished in the database %d", o.jobs, r.Error, r.Lost, r.Dup, r.DBUnfinished)
				}
				b.ReportMetric(r.WorkPerSec, "jobs/s")
				b.ReportMetric(r.CPUProcessUS, "cpu-µs/job")
				b.StartTimer()
			}
		})
	}
}
