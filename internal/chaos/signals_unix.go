//go:build unix

package chaos

import (
	"os"
	"syscall"
)

// The signals the pause phase stops and resumes a worker with.
var sigStop, sigCont os.Signal = syscall.SIGSTOP, syscall.SIGCONT

// errNoStop is nil where a process can be stopped and resumed.
var errNoStop error
