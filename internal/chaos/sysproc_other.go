//go:build !linux

package chaos

import "syscall"

// childSysProcAttr: children notice the harness died when their stdin closes.
func childSysProcAttr() *syscall.SysProcAttr { return nil }
