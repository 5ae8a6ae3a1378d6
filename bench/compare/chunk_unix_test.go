//go:build unix

package main

import (
	"runtime"
	"runtime/metrics"
	"testing"
)

// The tracker's counting chunks live outside the Go heap, so the heap samples
// neither count them nor see the GC's pacing move as a run hands out numbers.
func TestTrackChunksOffHeap(t *testing.T) {
	live := func() int64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	tr := newTracker(false)
	before := live()
	const chunks = 64 // 4 MiB of counters
	tr.reserve(chunks * chunkSize)
	grew := live() - before
	if tb := tr.bytes.Load(); tb != 0 {
		t.Errorf("tracker bytes on the heap = %d, want 0", tb)
	}
	if grew > 1<<20 {
		t.Errorf("live heap grew by %d bytes for %d chunks (%d bytes) kept off it", grew, chunks, chunks*chunkSize/4*4)
	}
	for s := int64(0); s < chunks*chunkSize; s += chunkSize - 1 {
		tr.executedSeq(s)
		tr.completedSeq(s)
		if e, d := tr.get(s); e != 1 || d != 1 {
			t.Fatalf("seq %d: executions, completions = %d, %d; want 1, 1", s, e, d)
		}
	}
	runtime.KeepAlive(tr)
}
