package drover

import (
	"testing"
	"time"
)

// A task's timeout_seconds becomes the job's timeout as the server stored it:
// whole milliseconds. Seconds times 1e9 fell a nanosecond short for some
// (1.001 s ran as 1.000999999 s).
func TestRemoteTaskTimeoutIsWholeMilliseconds(t *testing.T) {
	short := 0
	for ms := 1; ms <= 100_000; ms++ {
		secs := (time.Duration(ms) * time.Millisecond).Seconds()
		task := remoteTask{TimeoutSeconds: &secs}
		if got, want := task.job("w").Timeout, time.Duration(ms)*time.Millisecond; got != want {
			if short == 0 {
				t.Errorf("timeout_seconds %v: job timeout %s, want %s", secs, got, want)
			}
			short++
		}
	}
	if short > 0 {
		t.Errorf("%d of 100000 millisecond timeouts came out wrong", short)
	}
}
