package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The systems' own lower bounds are flags' bounds too: Drover's poll interval
// (at least 10ms) and River's fetch settings (at least 1ms, the poll no
// shorter than the cooldown) were refused only when that system's worker
// started, after the systems before it had run, and the report showed its
// runs as ERROR ("start: invalid poll_interval: 5ms, must be at least 10ms").
// They are refused by name before anything runs.
func TestRunRefusesSystemBounds(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--poll-interval-ms", "5"}, "--poll-interval-ms must be 0 (Drover's default) or at least 10 (Drover's bound), got 5"},
		{[]string{"--poll-interval-ms", "9223372036855"}, "--poll-interval-ms must be at most 9223372036854, got 9223372036855"},
		{[]string{"--river-fetch-cooldown", "500us"}, "--river-fetch-cooldown must be at least 1ms (River's bound), got 500µs"},
		{[]string{"--river-fetch-cooldown", "1ms", "--river-fetch-poll-interval", "999us"}, "--river-fetch-poll-interval must be at least 1ms (River's bound), got 999µs"},
		{[]string{"--river-fetch-poll-interval", "1ms"}, "--river-fetch-poll-interval must be at least --river-fetch-cooldown (2ms, River's bound), got 1ms"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			// On SQLite, the smallest run each bound was refused in: what
			// gets past the flags runs a burn-down of 20 jobs.
			args := append([]string{"--sqlite-only", "--river-sqlite", "--system", "drover,river", "--workloads", "burn-down",
				"--jobs", "20", "--sqlite-dir", t.TempDir(), "--cpuprofile", filepath.Join(t.TempDir(), "cpu.prof")}, c.args...)
			out, err := captureStdout(t, func() error { return run(args) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q\n%s", c.args, err, c.want, out)
			}
		})
	}
}
