//go:build !linux

package main

// residentBytes is 0 where this harness does not read the resident set.
func residentBytes() int64 { return 0 }
