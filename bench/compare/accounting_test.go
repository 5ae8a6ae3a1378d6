package main

import (
	"context"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/driver/sqlitedriver"
)

// A job whose completion was seen durable but whose handler never ran is
// lost: the verdict counted it as neither lost nor dup, so a queue that
// reported jobs done without running them passed "0 lost, 0 completed
// twice" (helper-81).
func TestVerdictCountsACompletionWithoutARunAsLost(t *testing.T) {
	tr := newTracker(false)
	tr.reserve(3)
	tr.executedSeq(0)
	tr.completedSeq(0)
	tr.completedSeq(1) // never ran
	tr.completedSeq(2) // never ran
	if lost, dup := tr.verdict(); lost != 2 || dup != 0 {
		t.Errorf("2 of 3 jobs completed without their handler running: verdict %d lost, %d dup; want 2 lost, 0 dup", lost, dup)
	}
}

// Drover's "unfinished in the database" reads its job rows, as River's and
// raw's checks read theirs, on both drivers. It read Drover's own counts,
// which the same statements write as the transitions, so rows set back to
// queued behind their counts' back were not seen (helper-81).
func TestDroverDatabaseCheckReadsTheRows(t *testing.T) {
	for _, kind := range []string{"postgres", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var s *droverSys
			if kind == "postgres" {
				dbURL := harnessDatabase(t)
				if err := ensureDatabase(ctx, dbURL); err != nil {
					t.Fatal(err)
				}
				admin, err := pgxpool.New(ctx, dbURL)
				if err != nil {
					t.Fatal(err)
				}
				defer admin.Close()
				s = newDroverPG(admin, dbURL, 0, nil, knobs{concurrency: 100})
			} else {
				s = newDroverSQLite(t.TempDir(), knobs{concurrency: 100})
			}
			defer s.close()
			if err := s.reset(ctx); err != nil {
				t.Fatal(err)
			}
			r := burnDown(ctx, s, opts{jobs: 2000, insertBatch: 500, insertWorkers: 1, stall: 30 * time.Second})
			if r.Error != "" || r.Lost != 0 || r.Dup != 0 || r.DBUnfinished != 0 {
				t.Fatalf("burn-down: %+v", r)
			}
			const setBack = `UPDATE drover_jobs SET status = 'queued', finished_at = NULL, finished_by = NULL, result = NULL, claim_seq = NULL
				WHERE id IN (SELECT id FROM drover_jobs ORDER BY id LIMIT 5)`
			var err error
			switch d := s.drv.(type) {
			case *pgdriver.Driver:
				_, err = d.Pool().Exec(ctx, setBack)
			case *sqlitedriver.Driver:
				_, err = d.DB().ExecContext(ctx, setBack)
			}
			if err != nil {
				t.Fatal(err)
			}
			if n, err := s.unfinished(ctx); err != nil || n != 5 {
				t.Errorf("5 job rows set back to queued behind their counts: unfinished() = %d, %v; want 5", n, err)
			}
		})
	}
}

// The continuous workload's heap figure leaves out the tracker's two arrays of
// chunk pointers (1 MiB, 9% of a 10 MiB heap, in the denominator of the line's
// change), and its first sample, taken before the load, is at 0 so that the
// fifths leave it out (it was 2-9 ms after its GC, so it counted).
func TestHeapSamplesLeaveTheHarnessOut(t *testing.T) {
	live := func() float64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return float64(s[0].Value.Uint64()) / (1 << 20)
	}
	before := live()
	tr := newTracker(false)
	got := sampleHeap(tr, time.Now())
	runtime.KeepAlive(tr)
	if got.HeapMiB > before+0.5 {
		t.Errorf("a heap sample beside a new tracker reads %.2f MiB, the heap before it %.2f: the tracker's own arrays are counted", got.HeapMiB, before)
	}

	s := newDroverSQLite(t.TempDir(), knobs{concurrency: 10})
	defer s.close()
	ctx := context.Background()
	if err := s.reset(ctx); err != nil {
		t.Fatal(err)
	}
	r := continuous(ctx, s, opts{insertBatch: 10, insertWorkers: 1, continuous: 1500 * time.Millisecond, maxPending: 100, stall: 30 * time.Second})
	if r.Error != "" || len(r.Heap) < 2 {
		t.Fatalf("continuous: %+v", r)
	}
	if r.Heap[0].At != 0 {
		t.Errorf("the sample before the load is at %.6f s; want 0, which the fifths leave out", r.Heap[0].At)
	}
	if (r.Heap[0].RSSMiB <= 0 || r.Heap[0].GoMiB <= 0) && runtime.GOOS == "linux" {
		t.Errorf("no resident memory read on linux: %+v", r.Heap[0])
	}
}

// drover-sqlite's memory line says the process's resident anonymous memory
// beside its verdict, the Go heap's: SQLite's own allocations
// (modernc.org/libc's page caches and statements) are outside the Go heap,
// and a worker that grew 81 MiB inside SQLite moved the heap figure by
// nothing, unsaid (helper-81).
func TestSQLiteMemoryLineShowsResidentMemory(t *testing.T) {
	var hs []memSample
	for i := 0; i <= 300; i++ {
		hs = append(hs, memSample{At: float64(i), HeapMiB: 10, RSSMiB: 50 + float64(i)/3, GoMiB: 20})
	}
	for _, sys := range []string{"drover", "drover-sqlite"} {
		res := []result{{Workload: "continuous", Param: "5m0s", System: sys, WorkSeconds: 300, Heap: hs}}
		for _, tg := range targets(res) {
			if !strings.Contains(tg.what, sys+" heap") {
				continue
			}
			// The verdict is the Go heap's (flat here); SQLite's line says
			// the resident memory beside it, which grew.
			if !tg.met || (sys == "drover-sqlite") != strings.Contains(tg.figure, "anonymous RSS (less the harness's tracker), with SQLite's own memory, 60.2 → 140.0 MiB") {
				t.Errorf("%s: %q %s met=%v; want met, and for SQLite the RSS said", sys, tg.what, tg.figure, tg.met)
			}
		}
	}
}

// The resident memory a sample says leaves out the tracker's chunks, which
// are mapped outside the Go heap (one byte a job): counted, they read as
// SQLite's memory growing with the table, 21 MiB over a 12-minute run of 24M
// jobs (sixty-second session), when it was the harness's own.
func TestResidentMemoryLeavesTheTrackerOut(t *testing.T) {
	if residentBytes() <= 0 {
		t.Skip("the resident set is read on linux only")
	}
	tr := newTracker(false)
	before := sampleHeap(tr, time.Now())
	raw0 := residentBytes()
	const jobs = 256 * chunkSize // 256 chunks, 16 MiB
	first := tr.reserve(jobs)
	for seq := first; seq < first+jobs; seq += 1024 { // a job of every 1 KiB makes each page resident
		tr.executedSeq(seq)
	}
	after := sampleHeap(tr, time.Now())
	if grew := float64(residentBytes()-raw0) / (1 << 20); grew < 15 {
		t.Fatalf("counting %d jobs made %.1f MiB resident; want the tracker's 16 (is it on the Go heap?)", jobs, grew)
	}
	if grew := after.RSSMiB - before.RSSMiB; grew > 4 {
		t.Errorf("the sampled resident memory grew %.1f MiB (%.1f → %.1f) with the tracker's 16 MiB of chunks; want them left out", grew, before.RSSMiB, after.RSSMiB)
	}
}
