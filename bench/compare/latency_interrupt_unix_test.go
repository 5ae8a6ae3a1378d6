//go:build unix

package main

import (
	"bufio"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An interrupt during the latency workload stops its schedule: the offering
// loop slept until each job's time whatever the context, so Ctrl-C in a
// 30-second latency run took effect only at the window's end (37 s after it
// in a 40 s run), and a second Ctrl-C, caught by the same handler, did nothing.
func TestRunInterruptedDuringLatency(t *testing.T) {
	dbURL := harnessDatabase(t)
	stderr := os.Stderr
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	os.Stderr = w
	defer func() { os.Stderr = stderr }()
	sent := make(chan time.Time, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if len(sent) == 0 && strings.Contains(sc.Text(), "latency: offering") {
				sent <- time.Now()
				if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
					t.Errorf("send SIGINT: %v", err)
				}
			}
		}
	}()
	const window = time.Minute
	out, err := captureStdout(t, func() error {
		return run([]string{"--database-url", dbURL, "--system", "drover", "--workloads", "burn-down,latency",
			"--jobs", "100", "--latency-rate", "20", "--latency-duration", window.String()})
	})
	returned := time.Now()
	w.Close()
	if err == nil || !strings.Contains(err.Error(), "interrupted during latency") {
		t.Fatalf("run = %v, want it interrupted during latency\n%s", err, out)
	}
	at := <-sent
	if took := returned.Sub(at); took > window/3 {
		t.Fatalf("run returned %s after the interrupt, want well before the %s schedule's end", took.Round(time.Millisecond), window)
	}
	if !strings.Contains(out, "burn-down 100 jobs") || strings.Contains(out, "latency 20/s") {
		t.Fatalf("the report should show the burn-down, not the interrupted latency run:\n%s", out)
	}
}
