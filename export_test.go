package drover

import (
	"testing"
	"time"
)

// SetClaimWithoutIDFor sets how long a remote worker claims without a
// request_id after a server refused one, for t's duration. t must not be
// parallel: the setting is the package's.
func SetClaimWithoutIDFor(t testing.TB, d time.Duration) {
	old := claimWithoutIDFor
	claimWithoutIDFor = d
	t.Cleanup(func() { claimWithoutIDFor = old })
}

// Draining reports whether w's Stop has begun: it claims no more, and waits
// for its jobs.
func Draining(w *Worker) bool { return w.draining.Load() }
