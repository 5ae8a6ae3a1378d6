package main

import "testing"

// TestHeapFifths: the means cover the first and last fifth of the window and
// leave out the sample taken before the load started.
func TestHeapFifths(t *testing.T) {
	hs := []memSample{{At: 0, HeapMiB: 1}, {At: 5, HeapMiB: 10}, {At: 10, HeapMiB: 20}, {At: 30, HeapMiB: 99},
		{At: 50, HeapMiB: 30}, {At: 60, HeapMiB: 40}}
	first, last := heapFifths(hs, 60)
	if first != 15 || last != 35 {
		t.Errorf("heapFifths = %v, %v; want 15 (samples at 5 s and 10 s), 35 (at 50 s and 60 s)", first, last)
	}
}
