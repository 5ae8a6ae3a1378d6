package pgdriver_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/drover-dev/drover/driver"
)

// A job read alone (JobGet, and every fenced call answers one row the same
// way) is a few hundred bytes. Kept by the caller, it must not keep a claim's
// worth of memory alive with it: a result's slab sized for 64 jobs and 16 KiB
// of args made each kept job cost ~40 KiB. Not parallel: it reads the heap.
func TestAJobReadAloneKeepsLittleMemory(t *testing.T) {
	ctx := context.Background()
	d := open(t)
	ins, err := d.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{"n":1}`), MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id := ins[0].Job.ID
	get := func() *driver.Job {
		j, err := d.JobGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	for range 20 { // warm the pool and pgx's statement cache
		get()
	}
	const n = 200
	kept := make([]*driver.Job, 0, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		kept = append(kept, get())
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	runtime.KeepAlive(kept)
	if per > 4<<10 {
		t.Errorf("each job kept from JobGet holds %d bytes of heap, want under 4 KiB (the job is ~400)", per)
	}
}
