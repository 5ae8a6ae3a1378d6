// Package safedelay calls a user's backoff function the way both a library
// worker and the HTTP server must: a panic in it falls back to a default, and
// a delay out of range is brought within it, each logged.
package safedelay

import (
	"log/slog"
	"slices"
	"time"
)

// Of is f(n) kept within 0 to limit, or fallback(n) if f panics. A negative
// delay would put a retry's run_at before its failure, ahead of the jobs
// already waiting; a huge one, an overflow say, parked the job for centuries.
// log hears of either, with attrs.
func Of(f, fallback func(int) time.Duration, n int, limit time.Duration, log *slog.Logger, attrs ...any) (d time.Duration) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("backoff function panicked; using DefaultBackoff", slices.Concat(attrs, []any{"panic", r})...)
			d = fallback(n)
		}
		if d < 0 || d > limit {
			log.Warn("backoff function returned a delay out of range; using the nearest of 0 and MaxBackoff",
				slices.Concat(attrs, []any{"delay", d, "max", limit})...)
			d = min(max(d, 0), limit)
		}
	}()
	return f(n)
}
