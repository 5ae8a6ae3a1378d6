package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/sqlitedriver"
)

// BenchmarkSQLiteRowWidth runs raw SQLite's loop (claim 1,000 with one UPDATE,
// complete them 500 at a time with another, one goroutine, nothing else) on two
// rows: Drover's job row, migrated by its driver (its columns, CHECKs and
// indexes; no event, no fence, no worker: drover-row, the raw-sqlite-row
// system's statements), and the raw baseline's three-column row (narrow-row,
// raw-sqlite's). The first is the most any queue on Drover's row could reach;
// the "half of raw SQLite" is measured against the second.
// drover-driver runs Drover's own claim and batch completion through its
// driver on the same jobs, without a worker. split-row runs the loop on a
// layout with a narrow hot row that keeps the guarantees (splitrow_test.go),
// an experiment no driver uses.
//
//	go -C bench/compare test -run XXX -bench SQLiteRowWidth -benchtime 1x .
func BenchmarkSQLiteRowWidth(b *testing.B) {
	const jobs = 300_000
	b.Run("drover-row", func(b *testing.B) {
		benchRow(b, jobs, func(dir string) rawStore { return &rawSQLiteRow{path: filepath.Join(dir, "raw-row.db")} })
	})
	b.Run("drover-driver", func(b *testing.B) {
		// Drover's own claim and batch completion, through its driver, on
		// the same jobs: the statements a worker runs, without the worker.
		for range b.N {
			b.StopTimer()
			d := droverDriver(b, jobs)
			b.StartTimer()
			b.ReportMetric(driverLoop(b, d, jobs), "jobs/s")
			_ = d.Close()
		}
	})
	b.Run("split-row", func(b *testing.B) {
		// An experiment (splitrow_test.go): the same loop on a layout that
		// keeps the guarantees with a narrow hot row.
		benchRow(b, jobs, func(dir string) rawStore {
			return &rawSQLiteSplit{rawSQLite: rawSQLite{path: filepath.Join(dir, "split.db")}}
		})
	})
	b.Run("narrow-row", func(b *testing.B) {
		benchRow(b, jobs, func(dir string) rawStore { return &rawSQLite{path: filepath.Join(dir, "raw.db")} })
	})
}

// benchRow runs storeLoop on a store that newStore makes in a new directory,
// filled with jobs queued jobs (untimed), reports its jobs/s, and checks that
// no job was left unfinished.
func benchRow(b *testing.B, jobs int, newStore func(dir string) rawStore) {
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		st := newStore(b.TempDir())
		if err := st.reset(ctx); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < jobs; i += 1000 {
			if err := (&rawSys{store: st}).insertBatch(ctx, int64(i), min(1000, jobs-i)); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		b.ReportMetric(storeLoop(b, st, jobs), "jobs/s")
		b.StopTimer()
		if n, err := st.unfinished(ctx); err != nil || n != 0 {
			b.Fatalf("%d jobs unfinished after the loop (%v)", n, err)
		}
		if err := st.wipe(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// storeLoop claims jobs 1,000 at a time and completes them 500 at a time
// through st, one call after the other, and answers jobs/s.
func storeLoop(b *testing.B, st rawStore, jobs int) float64 {
	ctx := context.Background()
	start := time.Now()
	for done := 0; done < jobs; {
		claimed, err := st.claim(ctx, 1000)
		if err != nil {
			b.Fatal(err)
		}
		if len(claimed) == 0 {
			b.Fatalf("no job left to claim after %d of %d", done, jobs)
		}
		ids := make([]int64, len(claimed))
		for i, j := range claimed {
			ids[i] = j.id
		}
		for i := 0; i < len(ids); i += 500 {
			if err := st.complete(ctx, ids[i:min(i+500, len(ids))]); err != nil {
				b.Fatal(err)
			}
		}
		done += len(claimed)
	}
	return float64(jobs) / time.Since(start).Seconds()
}

// driverLoop claims jobs 1,000 at a time, started, and completes them 500 at
// a time through d, and answers jobs/s.
func driverLoop(b *testing.B, d *sqlitedriver.Driver, jobs int) float64 {
	ctx := context.Background()
	start := time.Now()
	for done := 0; done < jobs; {
		claimed, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"default"}, Limit: 1000, Owner: "w",
			LeaseDuration: 30 * time.Second, Start: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(claimed) == 0 {
			b.Fatalf("no job left to claim after %d of %d", done, jobs)
		}
		for i := 0; i < len(claimed); i += 500 {
			batch := claimed[i:min(i+500, len(claimed))]
			ps := make([]driver.CompleteParams, len(batch))
			for k, j := range batch {
				ps[k] = driver.CompleteParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken},
					Result: []byte("null")}
			}
			for _, err := range d.JobCompleteManyErrs(ctx, ps) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		done += len(claimed)
	}
	return float64(jobs) / time.Since(start).Seconds()
}

// droverDriver is Drover's SQLite driver on a new database with jobs queued
// jobs inserted through it.
func droverDriver(b *testing.B, jobs int) *sqlitedriver.Driver {
	ctx := context.Background()
	d, err := sqlitedriver.Open(filepath.Join(b.TempDir(), "drover.db"), sqlitedriver.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := d.MigrateUp(ctx); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < jobs; i += 1000 {
		ps := make([]driver.InsertParams, min(1000, jobs-i))
		for k := range ps {
			ps[k] = driver.InsertParams{Kind: "noop", Queue: "default", Args: argsOf(int64(i + k)), MaxAttempts: 25}
		}
		if _, err := d.JobInsertMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	return d
}
