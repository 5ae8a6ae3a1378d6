// Package drivertest is the conformance suite every Drover driver must pass. A driver
// package runs it from a _test file:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Exercise(t, func(t *testing.T) driver.Driver {
//			d := open(t) // a fresh, migrated, empty database private to t
//			t.Cleanup(func() { d.Close() })
//			return d
//		})
//	}
//
// The suite talks to the driver only through driver.Driver and judges what it sees
// with the lifecycle package: after every step the job's per-status invariants hold,
// and at the end of every test each job's event log replays as a legal history.
// Time-dependent rules are exercised through the Now fields of the params, so the
// suite never sleeps.
//
// Stability: a deliberate public seam for driver authors; it grows with the interface.
package drivertest

import (
	"testing"

	"github.com/drover-dev/drover/driver"
)

// suiteTest is one conformance test; it gets a harness over a fresh driver.
type suiteTest struct {
	name string
	run  func(h *harness)
}

// Exercise runs the conformance suite. open must return a fresh, migrated, empty
// driver private to t (its own SQLite file or PostgreSQL schema) and register its
// Close with t.Cleanup. Every test runs in parallel with the others.
func Exercise(t *testing.T, open func(t *testing.T) driver.Driver) {
	groups := []struct {
		name  string
		tests []suiteTest
	}{
		{"Transitions", transitionTests},
		{"Forbidden", forbiddenTests},
		{"Reaper", reaperTests},
		{"Fencing", fencingTests},
		{"RequestID", requestIDTests},
		{"IdempotencyKey", idempotencyKeyTests},
		{"Claim", claimTests},
		{"Queues", queueTests},
		{"DLQ", dlqTests},
		{"Jobs", jobTests},
		{"Events", eventTests},
		{"Leader", leaderTests},
		{"Wakeup", wakeupTests},
		{"Driver", driverTests},
		{"Batch", batchTests},
		{"BatchFences", batchFenceTests},
		{"TimeBoundaries", timeBoundaryTests},
		{"ClaimReplay", claimReplayTests},
		{"StartLease", startLeaseTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					tc.run(newHarness(t, open))
				})
			}
		})
	}
}
