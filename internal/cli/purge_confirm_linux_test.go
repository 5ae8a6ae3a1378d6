package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// openPTY opens a pseudo-terminal: the terminal end a command reads as its
// stdin, and the end a person types into.
func openPTY(t *testing.T) (term, keyboard *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	var unlock int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
		t.Skipf("unlock the pseudo-terminal: %v", errno)
	}
	var n uint32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Skipf("name the pseudo-terminal: %v", errno)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, m
}

// `drover dlq purge` deletes the failed jobs, the DLQ's only record, for
// good, of every queue unless --queue says otherwise: a person at a terminal
// is asked first, as Temporal's CLI asks before its batch commands, and
// anything but y leaves the DLQ as it was. --yes skips the question, and a
// command whose stdin is no terminal (a script: a pipe, /dev/null) is not
// asked, so scripts written before the question keep working.
func TestDLQPurgeAsksOnATerminal(t *testing.T) {
	t.Parallel()
	db := testdb.URL(t, "sqlite")
	drv := testdb.OpenURL(t, "sqlite", db)
	c, err := drover.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fail := func() {
		t.Helper()
		r, err := c.Enqueue(ctx, "rep", nil, &drover.EnqueueOpts{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		failJob(t, drv, r.Job.ID)
	}
	dlq := func() int {
		t.Helper()
		jobs, err := c.DLQList(ctx, "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(jobs)
	}
	purge := func(stdin *os.File, args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := mainWith(append([]string{"--database-url", db, "dlq", "purge"}, args...), stdin, &out, &errb)
		return code, out.String(), errb.String()
	}
	typed := func(line string) *os.File {
		t.Helper()
		term, keyboard := openPTY(t)
		if _, err := keyboard.WriteString(line); err != nil {
			t.Fatal(err)
		}
		return term
	}

	fail()
	fail()
	for _, answer := range []string{"n\n", "\n", "yes please\n"} {
		code, stdout, stderr := purge(typed(answer))
		if code != 1 || !strings.Contains(stderr, "[y/N]") || !strings.Contains(stderr, "nothing purged") || dlq() != 2 {
			t.Fatalf("dlq purge on a terminal, answered %q: exit %d, stdout %q, stderr %q, %d failed jobs left; want exit 1, asked, nothing purged (2 left)",
				answer, code, stdout, stderr, dlq())
		}
	}
	code, stdout, stderr := purge(typed("y\n"))
	if code != 0 || !strings.Contains(stderr, "[y/N]") || stdout != "purged 2 failed jobs\n" || dlq() != 0 {
		t.Fatalf("dlq purge on a terminal, answered y: exit %d, stdout %q, stderr %q, %d failed jobs left; want exit 0, asked, purged 2",
			code, stdout, stderr, dlq())
	}

	// Not asked: with --yes (the "n" typed is never read), and from a script.
	fail()
	if code, stdout, stderr := purge(typed("n\n"), "--yes"); code != 0 || stderr != "" || stdout != "purged 1 failed jobs\n" {
		t.Errorf("dlq purge --yes on a terminal: exit %d, stdout %q, stderr %q; want exit 0, not asked, purged 1", code, stdout, stderr)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.Close()
	for name, stdin := range map[string]*os.File{"/dev/null": null, "a pipe": r} {
		fail()
		if code, stdout, stderr := purge(stdin); code != 0 || stderr != "" || stdout != "purged 1 failed jobs\n" {
			t.Errorf("dlq purge, stdin %s: exit %d, stdout %q, stderr %q; want exit 0, not asked, purged 1", name, code, stdout, stderr)
		}
	}
}
