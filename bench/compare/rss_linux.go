//go:build linux

package main

import (
	"bytes"
	"os"
	"strconv"
)

// residentBytes is this process's resident set size (/proc/self/statm's
// second field, in pages); 0 if it cannot be read.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}
