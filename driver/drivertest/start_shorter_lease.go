package drivertest

import (
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// startLeaseTests: a start's lease duration is the lease the reaper honours,
// also when it ends before the claim's.
var startLeaseTests = []suiteTest{
	{"StartWithAShorterLeaseIsReapedAtItsEnd", testStartShorterLeaseReaped},
}

// testStartShorterLeaseReaped: a job claimed at t0 for 30s and started at
// t0+1s with a lease of 5s (until t0+6s) is not reaped at t0+6s and is reaped
// at t0+7s, long before the claim's lease would have ended. A reaper that
// still went by the claim's lease would leave a dead worker's job waiting.
func testStartShorterLeaseReaped(h *harness) {
	c := h.claimedJob(nil) // lease until t0+30s
	p := fence(c, h.at(time.Second))
	p.LeaseDuration = 5 * time.Second
	r := h.transition("JobStart", c.ID, lifecycle.EventStarted, lifecycle.StatusRunning, func() (*driver.Job, error) {
		return h.d.JobStart(h.ctx, p)
	})
	if r.LeaseExpiresAt == nil || !r.LeaseExpiresAt.Equal(h.tm(6*time.Second)) {
		h.t.Fatalf("JobStart at t0+1s with a 5s lease: lease_expires_at = %s, want t0+6s", fmtTimePtr(r.LeaseExpiresAt))
	}
	if got := h.mustReap(6 * time.Second); len(got) != 0 {
		h.t.Errorf("JobReapExpired at t0+6s reaped %v; the lease ends at t0+6s", jobIDs(got))
	}
	got := h.mustReap(7 * time.Second)
	if len(got) != 1 || got[0].ID != c.ID || got[0].Status != lifecycle.StatusQueued {
		h.t.Errorf("JobReapExpired at t0+7s = %v; want job %d, started with a lease until t0+6s, requeued", jobIDs(got), c.ID)
	}
}
