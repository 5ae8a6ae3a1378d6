package drivertest

import (
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// timeBoundaryTests pin the instants at which time-bound rules flip, to the
// microsecond both drivers store: a lease (a job's, or leadership's) is
// expired only once now is past its end, and retention deletes only jobs
// finished before its cutoff.
// A reaper that took a lease at its last instant (or a second early) would
// hand a job that its holder may still finish to another worker.
var timeBoundaryTests = []suiteTest{
	{"ReapOnlyPastTheLeaseEnd", testReapLeaseBoundary},
	{"RetentionOnlyBeforeTheCutoff", testRetentionBoundary},
	{"LeadershipTakenOnlyPastTheLeaseEnd", testLeaderLeaseBoundary},
}

// testReapLeaseBoundary: a claimed job leased until t0+30s and a running one
// whose heartbeat leased it until t0+50s are not reaped at the last
// microsecond before their lease ends nor at its end, and are reaped one
// microsecond after it.
func testReapLeaseBoundary(h *harness) {
	claimed := h.claimedJob(nil)                   // lease until t0+30s
	running := h.runningJob(nil)                   // lease until t0+30s …
	hb := h.mustHeartbeat(running, 20*time.Second) // … now t0+50s
	if !hb.LeaseExpiresAt.Equal(h.tm(50 * time.Second)) {
		h.t.Fatalf("heartbeat at t0+20s leased job %d until %s, want t0+50s", running.ID, fmtTime(hb.LeaseExpiresAt))
	}
	for _, c := range []struct {
		j   *driver.Job
		end time.Duration
	}{{claimed, leaseDuration}, {running, 50 * time.Second}} {
		s := h.snap(c.j.ID)
		for _, at := range []time.Duration{c.end - 2*time.Second, c.end - time.Microsecond, c.end} {
			if got := h.mustReap(at); len(got) != 0 {
				h.t.Errorf("JobReapExpired at t0+%s reaped %v; the lease of job %d ends at t0+%s", at, jobIDs(got), c.j.ID, c.end)
			}
		}
		h.wantUnchanged(s, "JobReapExpired up to the lease's end")
		got := h.reapOne(c.j.ID, c.end+time.Microsecond)
		if got.Status != lifecycle.StatusQueued || got.Attempt != c.j.Attempt {
			h.t.Errorf("job %d reaped a microsecond past its lease: %s attempt %d, want queued attempt %d", c.j.ID, got.Status, got.Attempt, c.j.Attempt)
		}
	}
}

// testRetentionBoundary: a job that finished at t0+2s is kept by a cutoff of
// t0+2s (it did not finish before it) and deleted by one a microsecond later;
// a job that finished at t0+3s is kept by both.
func testRetentionBoundary(h *harness) {
	a := h.mustComplete(h.runningJob(nil), 2*time.Second, nil)
	b := h.mustComplete(h.runningJob(nil), 3*time.Second, nil)
	sa, sb := h.snap(a.ID), h.snap(b.ID)
	for _, cut := range []time.Duration{time.Second, 2 * time.Second} {
		if n, err := h.d.JobDeleteFinished(h.ctx, driver.DeleteFinishedParams{Before: h.tm(cut), Limit: 100}); err != nil || n != 0 {
			h.t.Errorf("JobDeleteFinished(before t0+%s) = %d, %v; want 0: job %d finished at t0+2s", cut, n, err, a.ID)
		}
	}
	h.wantUnchanged(sa, "JobDeleteFinished up to its finished_at")
	n, err := h.d.JobDeleteFinished(h.ctx, driver.DeleteFinishedParams{Before: h.tm(2*time.Second + time.Microsecond), Limit: 100})
	if err != nil || n != 1 {
		h.t.Errorf("JobDeleteFinished(before t0+2s+1µs) = %d, %v; want 1 (job %d)", n, err, a.ID)
	}
	h.wantGone(a.ID)
	h.wantUnchanged(sb, "JobDeleteFinished(before t0+2s+1µs)")
}

// testLeaderLeaseBoundary: a leader elected at t0 for 30s still leads at
// t0+30s, its lease's last instant, as a job's lease holder does: another
// engine is refused then and elected a microsecond later, and LeaderGet names
// each in turn.
func testLeaderLeaseBoundary(h *harness) {
	if !h.elect("a", 0) {
		h.t.Fatalf("a was not elected with no leader")
	}
	for _, at := range []time.Duration{30*time.Second - time.Microsecond, 30 * time.Second} {
		if h.elect("b", at) {
			h.t.Errorf("b elected at t0+%s; a leads until t0+30s", at)
		}
	}
	h.wantLeader("a", 30*time.Second)
	if !h.elect("b", 30*time.Second+time.Microsecond) {
		h.t.Errorf("b not elected at t0+30.000001s, a microsecond past a's lease")
	}
	h.wantLeader("b", 60*time.Second+time.Microsecond)
}
