//go:build unix

package main

import (
	"bufio"
	"os"
	"strings"
	"syscall"
	"testing"
)

// An interrupt stops the run: the workload it cut short is left out of the
// report (its jobs cut off counted as lost, and the lost line read NOT MET),
// the workloads before it are printed, and the run ends in an error that says
// so. SQLite only: no PostgreSQL needed.
func TestRunInterrupted(t *testing.T) {
	stderr := os.Stderr
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	os.Stderr = w
	defer func() { os.Stderr = stderr }()
	// The signal goes once the continuous workload has begun, while run's
	// handler for it is installed: it is what run logs on starting it.
	go func() {
		sc := bufio.NewScanner(r)
		sent := false
		for sc.Scan() {
			if !sent && strings.Contains(sc.Text(), "continuous on drover-sqlite") {
				sent = true
				if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
					t.Errorf("send SIGINT: %v", err)
				}
			}
		}
	}()
	out, err := captureStdout(t, func() error {
		return run([]string{"--sqlite-only", "--system", "drover", "--workloads", "burn-down,continuous",
			"--jobs", "500", "--continuous", "10m", "--sqlite-dir", t.TempDir()})
	})
	w.Close()
	if err == nil || !strings.Contains(err.Error(), "interrupted during continuous") {
		t.Fatalf("run = %v, want it interrupted during continuous\n%s", err, out)
	}
	if !strings.Contains(out, "burn-down 500 jobs") || strings.Contains(out, "continuous") || strings.Contains(out, "ERROR") {
		t.Fatalf("the report should show the burn-down, not the interrupted continuous run, and no ERROR:\n%s", out)
	}
}
