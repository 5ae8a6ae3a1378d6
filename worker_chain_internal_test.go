package drover

import (
	"testing"
	"time"
)

// wide is an error whose Unwrap() []error returns itself many times over.
type wide struct{ kids []error }

func (w *wide) Error() string   { return "wide" }
func (w *wide) Unwrap() []error { return w.kids }

// The chain walk is bounded in the work it does, not only in the errors it
// visits: a wide error that wraps itself had every level of the recursion
// iterate all its children after the budget was spent, and the job's
// goroutine (and Stop) waited on it (helper-43): here 10,000 levels of a
// million children, minutes of work, where the bound leaves a few
// milliseconds. The wait below only detects the hang.
func TestErrorChainWalkIsBoundedInWork(t *testing.T) {
	w := &wide{kids: make([]error, 1_000_000)}
	for i := range w.kids {
		w.kids[i] = w
	}
	visited := 0
	done := make(chan bool, 1)
	go func() {
		eachInChain(readable(w), func(error) bool { visited++; return false })
		done <- found[snoozeError](w) != nil
	}()
	select {
	case snoozed := <-done:
		if visited != maxErrorChain || snoozed {
			t.Errorf("visited %d errors (want the bound, %d), found a Snooze: %v", visited, maxErrorChain, snoozed)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("walking a wide error that wraps itself did not end")
	}
}
