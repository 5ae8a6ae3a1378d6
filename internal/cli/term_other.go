//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package cli

import "os"

// isTerminal is false where it cannot be told: commands then act as for a
// script, without asking.
func isTerminal(*os.File) bool { return false }
