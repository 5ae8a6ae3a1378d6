package drover_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/drover-dev/drover"
)

// ceiling is min(max, base·2^(attempt-1)) computed without overflow.
func ceiling(base, max time.Duration, attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	c := new(big.Int).Lsh(big.NewInt(int64(base)), uint(attempt-1))
	if c.Cmp(big.NewInt(int64(max))) > 0 {
		return max
	}
	return time.Duration(c.Int64())
}

func TestBackoffExponentialBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		base, max time.Duration
	}{
		{"default", time.Second, time.Hour},
		{"tiny base", time.Nanosecond, time.Minute},
		{"zero base", 0, time.Hour},
		{"base above max", time.Hour, time.Minute},
		{"no practical cap", time.Second, time.Duration(math.MaxInt64)},
		{"huge base", time.Duration(math.MaxInt64 / 3), time.Duration(math.MaxInt64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := drover.ExponentialBackoff(tc.base, tc.max)
			for attempt := -1; attempt <= 70; attempt++ {
				limit := ceiling(tc.base, tc.max, attempt)
				for range 200 {
					d := b(attempt)
					if d < 0 || d > limit {
						t.Fatalf("ExponentialBackoff(%s, %s)(%d) = %s, want within [0, %s]", tc.base, tc.max, attempt, d, limit)
					}
				}
			}
		})
	}
}

func TestBackoffExponentialSpread(t *testing.T) {
	t.Parallel()
	b := drover.ExponentialBackoff(time.Second, time.Hour)
	for _, attempt := range []int{1, 5, 30} {
		limit := ceiling(time.Second, time.Hour, attempt)
		seen := map[time.Duration]bool{}
		var low, high int
		const n = 1000
		for range n {
			d := b(attempt)
			seen[d] = true
			if d < limit/2 {
				low++
			} else {
				high++
			}
		}
		// Full jitter is uniform: both halves of the range get a fair share.
		if len(seen) < n/2 || low < n/4 || high < n/4 {
			t.Errorf("attempt %d: %d distinct delays of %d, %d below half of %s and %d above; want a uniform spread",
				attempt, len(seen), n, low, limit, high)
		}
	}
	// The ceiling grows with the attempt until the cap.
	var max5, max10 time.Duration
	for range 1000 {
		max5 = max(max5, b(5))
		max10 = max(max10, b(10))
	}
	if max5 > 16*time.Second || max10 <= 16*time.Second {
		t.Errorf("largest delays: attempt 5 %s (want ≤ 16s), attempt 10 %s (want > 16s)", max5, max10)
	}
}

func TestBackoffDegenerate(t *testing.T) {
	t.Parallel()
	for _, max := range []time.Duration{0, -time.Second} {
		b := drover.ExponentialBackoff(time.Second, max)
		for attempt := 1; attempt <= 70; attempt++ {
			if d := b(attempt); d != 0 {
				t.Fatalf("ExponentialBackoff(1s, %s)(%d) = %s, want 0", max, attempt, d)
			}
		}
	}
	if d := drover.DefaultBackoff(100); d < 0 || d > time.Hour {
		t.Errorf("DefaultBackoff(100) = %s, want within [0, 1h]", d)
	}
}
