package cli

import (
	"testing"
	"time"
)

// drover bench's p50 and p99 are nearest-rank percentiles: of 100 samples
// 1..100 ms, the p50 is 50 ms and the p99 99 ms (the index p×n read 51 and
// 100: the p99 of 100 jobs was the slowest one).
func TestBenchPercentileNearestRank(t *testing.T) {
	ms := func(n int) []time.Duration {
		s := make([]time.Duration, n)
		for i := range s {
			s[i] = time.Duration(i+1) * time.Millisecond
		}
		return s
	}
	for _, c := range []struct {
		n    int
		p    float64
		want time.Duration
	}{
		{100, 0.50, 50 * time.Millisecond},
		{100, 0.99, 99 * time.Millisecond},
		{10000, 0.99, 9900 * time.Millisecond},
		{10000, 0.50, 5000 * time.Millisecond},
		{101, 0.50, 51 * time.Millisecond},
		{1, 0.99, time.Millisecond},
		{3, 0.50, 2 * time.Millisecond},
	} {
		if got := benchPercentile(ms(c.n), c.p); got != c.want {
			t.Errorf("p%.0f of 1..%d ms = %s, want %s", 100*c.p, c.n, got, c.want)
		}
	}
}
