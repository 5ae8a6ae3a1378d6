//go:build unix

package main

import (
	"syscall"
	"unsafe"
)

// newTrackChunk maps a chunk outside the Go heap. A chunk holds no pointers,
// so the GC need not see it; off the heap it is not in the heap samples and
// does not raise the GC's heap goal as a run hands out sequence numbers (one
// byte a job, ~12 MiB over a 5-minute continuous run), so the process's GC runs
// as a worker's would without the harness. A mapping is never unmapped: a
// straggling handler may still count a job after its run ended, and a whole
// harness run maps less than 100 MiB. The bool reports whether the chunk is on
// the Go heap (only when the mapping failed).
func newTrackChunk() (*trackChunk, bool) {
	b, err := syscall.Mmap(-1, 0, int(unsafe.Sizeof(trackChunk{})),
		syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return new(trackChunk), true
	}
	return (*trackChunk)(unsafe.Pointer(unsafe.SliceData(b))), false
}
