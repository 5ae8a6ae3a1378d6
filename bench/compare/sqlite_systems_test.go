package main

import (
	"context"
	"testing"
	"time"
)

// TestSQLiteSystemsBurnDown runs a small burn-down on each SQLite system the
// harness has (River's included), and on the split-sqlite experiment, on real files: every job is
// worked once, none is lost, and the database holds none unfinished afterwards.
// The small claims and completion batches make the completer mix claims.
func TestSQLiteSystemsBurnDown(t *testing.T) {
	ctx := context.Background()
	k := knobs{concurrency: 50, claimBatch: 20, completionBatch: 10}
	o := opts{jobs: 2000, insertBatch: 300, insertWorkers: 1, stall: time.Minute}
	rk := riverKnobs{maxWorkers: 50, fetchCooldown: 2 * time.Millisecond, fetchPoll: 20 * time.Millisecond, insertFast: true}
	for _, s := range []system{newDroverSQLite(t.TempDir(), k), newRiverSQLite(t.TempDir(), rk), newRawSQLite(t.TempDir(), k),
		newRawSQLiteRow(t.TempDir(), k), newSplitSQLite(t.TempDir(), k)} {
		t.Run(s.name(), func(t *testing.T) {
			defer s.close()
			if err := s.reset(ctx); err != nil {
				t.Fatal(err)
			}
			o := o
			if s.name() == "river-sqlite" {
				o.jobs = 300 // ~60 jobs/s under -race: 2,000 took half a minute
			}
			r := burnDown(ctx, s, o)
			if r.Error != "" || r.Lost != 0 || r.Dup != 0 || r.DBUnfinished != 0 || r.WorkPerSec <= 0 {
				t.Errorf("burn-down of %d: error %q, lost %d, dup %d, unfinished in the database %d, %.0f jobs/s",
					o.jobs, r.Error, r.Lost, r.Dup, r.DBUnfinished, r.WorkPerSec)
			}
		})
	}
}
