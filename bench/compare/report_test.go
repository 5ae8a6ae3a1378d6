package main

import "testing"

// TestHeapFifths: the medians cover the first and last fifth of the window,
// leave out the sample taken before the load started, and a spike moves
// neither.
func TestHeapFifths(t *testing.T) {
	hs := []memSample{{At: 0, HeapMiB: 1}, {At: 5, HeapMiB: 10}, {At: 8, HeapMiB: 90}, {At: 10, HeapMiB: 20},
		{At: 30, HeapMiB: 99}, {At: 50, HeapMiB: 30}, {At: 60, HeapMiB: 40}}
	first, last := heapFifths(hs, 60)
	if first != 20 || last != 35 {
		t.Errorf("heapFifths = %v, %v; want 20 (median of the samples at 5, 8 and 10 s), 35 (at 50 s and 60 s)", first, last)
	}
}
