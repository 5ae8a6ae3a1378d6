package cli

import (
	"os"

	"golang.org/x/term"
)

// isTerminal reports whether f is a terminal: /dev/null, which cron and
// systemd give as stdin, is a character device too but no terminal. Where it
// cannot be told, commands act as for a script, without asking.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
