// Package testproc holds process helpers for tests that pause real processes.
package testproc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Stop sends p SIGSTOP and returns once every thread of p has stopped. kill(2)
// returns when the signal is queued, not when the target has stopped: a thread
// running on another core can still read a request and answer it (a NATS ack, a
// database write) after Signal returns. Where /proc is missing (not Linux) Stop
// returns after sending the signal.
func Stop(t testing.TB, p *os.Process) {
	t.Helper()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", p.Pid, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		stopped, err := allStopped(p.Pid)
		if err != nil || stopped {
			return // no /proc, or the process is gone (its own test notices), or stopped
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not stopped 10s after SIGSTOP", p.Pid)
		}
		// Nothing signals another process's stop to a non-parent (and waiting as
		// the parent would race exec.Cmd.Wait), so poll its state.
		poll := time.NewTimer(time.Millisecond)
		<-poll.C
	}
}

// allStopped reports whether every thread of pid is stopped (T), traced (t) or
// dead (Z, X), reading /proc/pid/task/*/stat.
func allStopped(pid int) (bool, error) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return false, err
	}
	if len(stats) == 0 {
		return false, fs.ErrNotExist
	}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a thread that exited
		}
		if err != nil {
			return false, err
		}
		// "pid (comm) S ...": comm may hold spaces and parentheses, so the state
		// is the first field after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("%s: unexpected format", path)
		}
		switch b[i+2] {
		case 'T', 't', 'Z', 'X': // stopped, traced, or dead: it answers nothing
		default:
			return false, nil
		}
	}
	return true, nil
}
