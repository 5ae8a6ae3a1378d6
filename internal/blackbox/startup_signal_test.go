package blackbox

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalDuringStartup: a signal that comes while a command connects to
// its database (here a "PostgreSQL" on loopback that accepts and never
// answers) stops a command that runs until stopped (`drover worker`) with
// status 0, saying so, as a signal once it runs does; it cuts short a
// command that had work to do (`drover migrate up`) with status 130, as a
// shell reports one SIGINT ended. Both said "error: context canceled" and
// exited 1, as for a failure.
func TestSignalDuringStartup(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	url := fmt.Sprintf("postgres://postgres@%s/drover?sslmode=disable", ln.Addr())
	for _, tc := range []struct {
		args     []string
		wantCode int
		wantOut  string
	}{
		{[]string{"worker", "--no-engine"}, 0, "stopped: a signal came before drover worker had started"},
		{[]string{"migrate", "up"}, 130, "error: interrupted by a signal: "},
	} {
		cmd := exec.Command(droverBin, append(tc.args, "--database-url", url)...)
		cmd.Env = cleanEnv()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case c := <-accepted:
			defer c.Close()
		case err := <-exited:
			t.Fatalf("drover %s exited before it connected: %v\n%s", strings.Join(tc.args, " "), err, stderr.String())
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("drover %s did not connect within 30s", strings.Join(tc.args, " "))
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		var werr error
		select {
		case werr = <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("drover %s still running 30s after SIGTERM during its start-up", strings.Join(tc.args, " "))
		}
		code := 0
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			code = ee.ExitCode()
		} else if werr != nil {
			t.Fatal(werr)
		}
		if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantOut) {
			t.Errorf("drover %s, SIGTERM while it connects: exit %d, stderr %q; want exit %d and %q",
				strings.Join(tc.args, " "), code, stderr.String(), tc.wantCode, tc.wantOut)
		}
	}
}
