//go:build linux

package main

import (
	"bytes"
	"os"
	"strconv"
)

// residentBytes is this process's resident anonymous memory (RssAnon in
// /proc/self/status): what it allocated, Go's and SQLite's (modernc.org/libc
// maps its own), without the pages of files it maps, such as SQLite's -shm
// index, which come and go with the WAL; 0 if it cannot be read.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("RssAnon:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest) // "1234", "kB"
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}
