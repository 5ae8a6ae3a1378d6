//go:build !unix

package main

// newTrackChunk allocates a chunk on the Go heap; the heap samples subtract it.
func newTrackChunk() (*trackChunk, bool) { return new(trackChunk), true }
