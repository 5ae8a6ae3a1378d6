package blackbox

import (
	"bufio"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// watched is a drover process whose stderr is read line by line; it is
// SIGKILLed at cleanup, and its stderr logged if the test failed.
type watched struct {
	cmd          *exec.Cmd
	out          *lockedBuffer
	shuttingDown chan struct{} // closed at its "shutting down:" line
	exited       chan struct{} // closed once waitErr is set
	waitErr      error
}

// startWatched starts drover with args; line, if not nil, sees each line of
// its stderr (on the reading goroutine).
func startWatched(t *testing.T, line func(string), args ...string) *watched {
	t.Helper()
	p := &watched{cmd: exec.Command(droverBin, args...), out: &lockedBuffer{},
		shuttingDown: make(chan struct{}), exited: make(chan struct{})}
	p.cmd.Env = cleanEnv()
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		closed := false
		for sc.Scan() {
			l := sc.Text()
			p.out.WriteString(l + "\n")
			if line != nil {
				line(l)
			}
			if !closed && strings.HasPrefix(l, "shutting down:") {
				closed = true
				close(p.shuttingDown)
			}
		}
	}()
	go func() { <-read; p.waitErr = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-p.exited:
		case <-time.After(time.Minute):
		}
		if t.Failed() {
			t.Logf("drover %s stderr:\n%s", args[0], p.out.String())
		}
	})
	return p
}

// stopTwice sends SIGTERM, waits for the shutdown to start, sends SIGINT and
// wants the process to exit 0 within 30s. It returns when the second signal
// was sent.
func (p *watched) stopTwice(t *testing.T, what string) time.Time {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.shuttingDown:
	case <-p.exited:
		t.Fatalf("%s exited on SIGTERM; want it to wait (--shutdown-timeout 10m)", what)
	case <-time.After(30 * time.Second):
		t.Fatal("no \"shutting down:\" line 30s after SIGTERM")
	}
	signaled := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		var ee *exec.ExitError
		if err := p.waitErr; errors.As(err, &ee) {
			t.Fatalf("%s exited with %d after a second signal, want 0", what, ee.ExitCode())
		} else if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still running 30s after a second signal (SIGTERM, then SIGINT; --shutdown-timeout 10m)", what)
	}
	return signaled
}
