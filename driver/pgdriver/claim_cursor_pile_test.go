package pgdriver_test

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Many jobs that became ready behind the claim cursor at once (a batch
// enqueued with a run_at in the past, or by a client whose clock runs behind
// the database's) are claimed in claim order once a claim from the cursor
// comes back short, as the README promises, while new jobs keep arriving past
// the cursor. Before, the claim that asked from the start for the rest of its
// limit took only that rest of the pile and then set the cursor past the new
// jobs again, marking the queue scanned from the start: every later claim took
// the new jobs first and only its shortfall of the pile, the cursor never
// reset, and the pile drained at 10 jobs a claim instead of 40, each of its
// jobs waiting seconds longer than in claim order, and without bound while
// the arrivals kept up.
func TestClaimCursorDrainsAPileBehindIt(t *testing.T) {
	t.Parallel()
	f := newCursorFixture(t, 40)
	wantNames(t, "the first claim", f.claim(40), names("j", 0, 40)) // a full claim: the cursor is past j39
	const pile = 200
	for i := 0; i < pile; i++ {
		f.insert(fmt.Sprint("late", i), 1, f.t0.Add(-time.Hour+time.Duration(i)*time.Millisecond))
	}
	left := map[string]bool{}
	for _, n := range names("late", 0, pile) {
		left[n] = true
	}
	arrived := 0
	// A claim of 40 every 100 ms, 30 new jobs past the cursor before each:
	// in claim order the pile is gone after five claims (200 / 40), the
	// arrivals wait behind it. Eleven claims are over a second.
	for step := 1; step <= 11 && len(left) > 0; step++ {
		for i := 0; i < 30; i++ {
			f.insert(fmt.Sprint("new", arrived), 1, f.t0.Add(time.Second+time.Duration(arrived)*time.Millisecond))
			arrived++
		}
		f.now = f.now.Add(100 * time.Millisecond)
		got := f.claim(40)
		if len(got) != 40 {
			t.Fatalf("claim %d took %d jobs, want 40 (%v)", step, len(got), got)
		}
		for _, n := range got {
			delete(left, n)
		}
	}
	if len(left) > 0 {
		rest := make([]string, 0, len(left))
		for n := range left {
			rest = append(rest, n)
		}
		slices.Sort(rest)
		t.Fatalf("%d of %d jobs behind the cursor still unclaimed after 11 claims (1.1 s), while %d newer jobs arrived past it: %v",
			len(left), pile, arrived, rest[:min(5, len(rest))])
	}
}
