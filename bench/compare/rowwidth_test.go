package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/sqlitedriver"
)

// BenchmarkSQLiteRowWidth runs raw SQLite's loop (claim 1,000 with one UPDATE,
// complete them 500 at a time with another, one goroutine, nothing else) on two
// rows: Drover's job row, migrated by its driver (its columns, CHECKs and
// indexes; no event, no fence, no worker: drover-row), and the raw baseline's
// three-column row (narrow-row). The first is the most any queue on Drover's
// row could reach; the "half of raw SQLite" is measured against the
// second. drover-driver runs Drover's own claim and batch completion through
// its driver on the same jobs, without a worker.
//
//	go -C bench/compare test -run XXX -bench SQLiteRowWidth -benchtime 1x .
func BenchmarkSQLiteRowWidth(b *testing.B) {
	const jobs = 300_000
	b.Run("drover-row", func(b *testing.B) {
		benchRow(b, jobs, droverRow,
			`UPDATE drover_jobs SET status = 'running', attempt = attempt + 1, executions = executions + 1,
			    owner = 'w', lease_token = lower(hex(randomblob(16))), lease_expires_at = ?1 + 30000000,
			    started_at = ?1, rev = rev + 2
			 WHERE id IN (SELECT id FROM drover_jobs
			              WHERE queue = 'default' AND status IN ('queued','stalled') AND run_at <= ?1
			              ORDER BY priority, run_at, id LIMIT 1000)
			 RETURNING id, args`,
			`UPDATE drover_jobs SET status = 'succeeded', result = 'null', owner = NULL, lease_token = NULL,
			    lease_expires_at = NULL, finished_at = ?1, finished_by = 'w', rev = rev + 1
			 WHERE id IN (SELECT value FROM json_each(?2)) AND status = 'running'`)
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
	b.Run("narrow-row", func(b *testing.B) {
		// raw's statements (rawSQLite); "?1 = ?1" takes the time rowLoop
		// binds, which the narrow row has no column for.
		benchRow(b, jobs, narrowRow,
			`UPDATE raw_jobs SET state = 1 WHERE id IN (
			    SELECT id FROM raw_jobs WHERE state = 0 AND ?1 = ?1 ORDER BY id LIMIT 1000) RETURNING id, args`,
			`UPDATE raw_jobs SET state = 2 WHERE id IN (SELECT value FROM json_each(?2)) AND state = 1 AND ?1 = ?1`)
	})
}

// benchRow runs rowLoop with claim and complete on a database setup fills
// with jobs queued jobs (untimed), and reports its jobs/s.
func benchRow(b *testing.B, jobs int, setup func(*testing.B, int) (*sql.DB, func()), claim, complete string) {
	for range b.N {
		b.StopTimer()
		db, done := setup(b, jobs)
		b.StartTimer()
		b.ReportMetric(rowLoop(b, db, jobs, claim, complete), "jobs/s")
		done()
	}
}

// droverRow is a database migrated by Drover's SQLite driver with jobs queued
// jobs inserted through it, and its writer connection.
func droverRow(b *testing.B, jobs int) (*sql.DB, func()) {
	d := droverDriver(b, jobs)
	return d.DB(), func() { _ = d.Close() }
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

// narrowRow is the raw baseline's table (rawSQLite) with jobs rows inserted.
func narrowRow(b *testing.B, jobs int) (*sql.DB, func()) {
	r := &rawSQLite{path: filepath.Join(b.TempDir(), "raw.db")}
	ctx := context.Background()
	if err := r.reset(ctx); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < jobs; i += 1000 {
		seqs := make([]int64, min(1000, jobs-i))
		for k := range seqs {
			seqs[k] = int64(i + k)
		}
		if err := r.insert(ctx, seqs); err != nil {
			b.Fatal(err)
		}
	}
	return r.db, func() { _ = r.wipe(ctx) }
}

// rowLoop claims and completes all jobs with the two statements (?1 is now in
// microseconds, ?2 the completed ids as a JSON array) and answers jobs/s.
func rowLoop(b *testing.B, db *sql.DB, jobs int, claim, complete string) float64 {
	ctx := context.Background()
	start := time.Now()
	for done := 0; done < jobs; {
		rows, err := db.QueryContext(ctx, claim, time.Now().UnixMicro())
		if err != nil {
			b.Fatal(err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			var args string
			if err := rows.Scan(&id, &args); err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			b.Fatal(err)
		}
		if len(ids) == 0 {
			b.Fatalf("no job left to claim after %d of %d", done, jobs)
		}
		for i := 0; i < len(ids); i += 500 {
			var s strings.Builder
			s.WriteByte('[')
			for k, id := range ids[i:min(i+500, len(ids))] {
				if k > 0 {
					s.WriteByte(',')
				}
				s.WriteString(strconv.FormatInt(id, 10))
			}
			s.WriteByte(']')
			res, err := db.ExecContext(ctx, complete, time.Now().UnixMicro(), s.String())
			if err != nil {
				b.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n != int64(min(i+500, len(ids))-i) {
				b.Fatalf("completed %d of %d claimed jobs", n, min(i+500, len(ids))-i)
			}
		}
		done += len(ids)
	}
	return float64(jobs) / time.Since(start).Seconds()
}
