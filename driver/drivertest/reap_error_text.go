package drivertest

import (
	"time"

	"github.com/drover-dev/drover/driver"
)

// testReapErrorText: the error history entry of a running attempt the reaper
// ends says why, in the same words on every driver. An attempt whose lease ran
// out past its timeout outlived it (its worker heartbeated on past the
// timeout, and the heartbeat stopped extending the lease, or it died within a
// lease before it); one whose lease ran out first stopped renewing it. Both
// drivers said "worker presumed dead" of the worker that was alive and
// heartbeating past its timeout.
func testReapErrorText(h *harness) {
	const (
		dead    = "lease expired while running (worker presumed dead)"
		overran = "lease expired while running past its timeout (the handler overran timeout_seconds, or its worker died)"
	)
	// Started at t0+1s, timeout 10s: the heartbeat at t0+20s leases it to
	// t0+41s, no further.
	over := h.runningJob(func(p *driver.InsertParams) { p.Timeout = 10 * time.Second })
	p := driver.HeartbeatParams{FenceParams: fence(over, h.at(20*time.Second))}
	p.LeaseDuration = leaseDuration
	if res, err := h.d.JobHeartbeat(h.ctx, p); err != nil || !res.LeaseExpiresAt.Equal(h.tm(41*time.Second)) {
		h.t.Fatalf("JobHeartbeat at t0+20s past the timeout = %+v, %v; want the lease until t0+41s", res, err)
	}
	// No timeout, and a timeout the lease ran out before: the worker stopped.
	plain := h.runningJob(nil)
	long := h.runningJob(func(p *driver.InsertParams) { p.Timeout = time.Hour })
	want := map[int64]string{over.ID: overran, plain.ID: dead, long.ID: dead}
	got := h.mustReap(42 * time.Second)
	if len(got) != len(want) {
		h.t.Fatalf("reap at t0+42s took %v, want %d jobs", jobIDs(got), len(want))
	}
	for _, j := range got {
		if len(j.Errors) != 1 || j.Errors[0].Error != want[j.ID] {
			h.t.Errorf("job %d (timeout %s) reaped with error history %+v, want one entry %q", j.ID, j.Timeout, j.Errors, want[j.ID])
		}
	}
}
