package chaos

import "syscall"

// childSysProcAttr kills a child when the harness dies, so none outlives it.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
