package drover

import (
	"math/rand/v2"
	"time"
)

// Backoff returns how long to wait before retrying after the given attempt failed
// (attempt counts from 1). The worker keeps the delay within 0 to MaxBackoff, as
// Snooze does its own: a negative delay retries at once, as 0 does (its run_at
// is never put before the failure, ahead of the jobs already waiting), and a
// longer one, an overflow say, waits MaxBackoff (at math.MaxInt64 the job was
// parked until the year 2318).
type Backoff func(attempt int) time.Duration

// MaxBackoff is the longest retry delay a worker applies: 366 days, as
// MaxSnooze and the longest retry_after_seconds a server takes.
const MaxBackoff = 366 * 24 * time.Hour

// ExponentialBackoff returns full-jitter exponential backoff: a uniformly random
// delay in [0, min(max, base·2^(attempt-1))]. Full jitter spreads retries of jobs
// that failed together (AWS Architecture Blog, "Exponential Backoff And Jitter").
func ExponentialBackoff(base, max time.Duration) Backoff {
	return func(attempt int) time.Duration {
		if attempt < 1 {
			attempt = 1
		}
		if base <= 0 {
			return 0 // base·2^(attempt-1) is 0
		}
		ceil := max
		if attempt <= 62 {
			if d := base << (attempt - 1); d > 0 && d < max && d>>(attempt-1) == base {
				ceil = d
			}
		}
		if ceil <= 0 {
			return 0
		}
		// Unsigned: ceil+1 overflows int64 when max is math.MaxInt64.
		return time.Duration(rand.Uint64N(uint64(ceil) + 1))
	}
}

// DefaultBackoff is ExponentialBackoff(1s, 1h).
var DefaultBackoff = ExponentialBackoff(time.Second, time.Hour)
