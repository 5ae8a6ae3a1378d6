//go:build !unix

package chaos

import (
	"errors"
	"os"
)

// Windows has no SIGSTOP: the harness, which pauses a worker past its lease,
// refuses to start there (Run), and these are never sent. They keep the
// package, and so the drover command, building on every system.
var sigStop, sigCont os.Signal = os.Interrupt, os.Interrupt

var errNoStop = errors.New("chaos: this system cannot stop and resume a process (SIGSTOP, SIGCONT); run the harness on Linux or macOS")
