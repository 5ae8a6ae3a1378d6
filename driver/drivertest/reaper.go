package drivertest

import (
	"encoding/json"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// reaperTests cover stall and requeue. JobReapExpired moves a stalled job on to
// queued or failed in the same transaction, so stalled → claimed (reclaim of a
// stalled row) is not reachable through the interface; the tests assert the reap's
// two events (stalled, then requeued or failed) instead.
var reaperTests = []suiteTest{
	{"ClaimedExpiredRequeuedWithoutUsingBudget", testReapClaimed},
	{"RunningExpiredRequeuedWithError", testReapRunning},
	{"RunningExpiredExhaustedFails", testReapRunningExhausted},
	{"OnlyExpiredLeases", testReapOnlyExpired},
	{"HeartbeatNeverShortensTheLease", testHeartbeatNeverShortens},
	{"BatchClaimMixedFates", testReapBatchClaim},
	{"RunningPastItsTimeout", testReapPastTimeout},
	{"ErrorSaysTimeoutOrDeadWorker", testReapErrorText},
}

// testReapPastTimeout: a running job with a timeout is never leased past
// started_at + timeout + one lease, however its holder heartbeats, so the
// reaper ends an attempt whose worker runs on past the timeout. A claimed job
// (not started) and a job without a timeout are leased as before.
func testReapPastTimeout(h *harness) {
	r := h.runningJob(func(p *driver.InsertParams) { p.Timeout = 10 * time.Second }) // started at t0+1s
	beat := func(j *driver.Job, now time.Duration, want time.Duration) {
		h.t.Helper()
		p := driver.HeartbeatParams{FenceParams: fence(j, h.at(now))}
		p.LeaseDuration = leaseDuration
		res, err := h.d.JobHeartbeat(h.ctx, p)
		if err != nil {
			h.t.Fatalf("JobHeartbeat of job %d at t0+%s: %v", j.ID, now, err)
		}
		if !res.LeaseExpiresAt.Equal(h.tm(want)) {
			h.t.Errorf("JobHeartbeat of job %d at t0+%s: lease until %s, want t0+%s", j.ID, now, fmtTime(res.LeaseExpiresAt), want)
		}
	}
	// started t0+1s, timeout 10s, lease 30s: never past t0+41s.
	beat(r, 5*time.Second, 35*time.Second)
	beat(r, 20*time.Second, 41*time.Second)
	beat(r, 35*time.Second, 41*time.Second)
	c := h.claimedJob(func(p *driver.InsertParams) { p.Timeout = time.Second })
	beat(c, 20*time.Second, 50*time.Second) // not started: no cap
	if got := h.mustReap(40 * time.Second); len(got) != 0 {
		h.t.Fatalf("reap at t0+40s took %v, want nothing yet", jobIDs(got))
	}
	before := h.snap(r.ID)
	q := h.reapOne(r.ID, 42*time.Second)
	if q.Status != lifecycle.StatusQueued || q.Executions != 1 || len(q.Errors) != 1 {
		h.t.Errorf("job reaped past its timeout: %s executions %d errors %+v, want queued, executions 1, one error entry", q.Status, q.Executions, q.Errors)
	}
	h.wantReapEvents(q, lifecycle.StatusRunning, len(before.events))
	h.rejected(r.ID, driver.ErrLeaseLost, "JobHeartbeat of the reaped attempt", func() error {
		p := driver.HeartbeatParams{FenceParams: fence(r, h.at(43*time.Second))}
		p.LeaseDuration = leaseDuration
		_, err := h.d.JobHeartbeat(h.ctx, p)
		return err
	})
}

// wantReapEvents checks the last two events of a reaped job: stalled from
// fromStatus, then requeued or failed, with seq rev-1 and rev.
func (h *harness) wantReapEvents(j *driver.Job, from lifecycle.Status, nBefore int) {
	h.t.Helper()
	evs := h.events(j.ID)
	if len(evs) != nBefore+2 {
		h.t.Fatalf("reaped job %d has events %s, want %d (+stalled +%s)", j.ID, fmtEvents(evs), nBefore+2, j.Status)
	}
	st, next := evs[len(evs)-2], evs[len(evs)-1]
	wantNext := lifecycle.EventRequeued
	if j.Status == lifecycle.StatusFailed {
		wantNext = lifecycle.EventFailed
	}
	if st.Type != lifecycle.EventStalled || st.From != from || st.To != lifecycle.StatusStalled || st.Seq != j.Rev-1 || st.Attempt != j.Attempt {
		h.t.Errorf("reaped job %d: event %s, want stalled %s→stalled seq %d attempt %d", j.ID, fmtEvent(st), from, j.Rev-1, j.Attempt)
	}
	if next.Type != wantNext || next.From != lifecycle.StatusStalled || next.To != j.Status || next.Seq != j.Rev || next.Attempt != j.Attempt {
		h.t.Errorf("reaped job %d: event %s, want %s stalled→%s seq %d attempt %d", j.ID, fmtEvent(next), wantNext, j.Status, j.Rev, j.Attempt)
	}
}

// reapOne reaps at t0+now and wants exactly job id back.
func (h *harness) reapOne(id int64, now time.Duration) *driver.Job {
	h.t.Helper()
	jobs := h.mustReap(now)
	if len(jobs) != 1 || jobs[0].ID != id {
		h.t.Fatalf("JobReapExpired at t0+%s = %v, want [%d]", now, jobIDs(jobs), id)
	}
	return jobs[0]
}

func testReapClaimed(h *harness) {
	c := h.claimedJob(func(p *driver.InsertParams) { p.MaxAttempts = 1 }) // lease until t0+30s
	if got := h.mustReap(29 * time.Second); len(got) != 0 {
		h.t.Fatalf("reap before the lease expired took %v, want nothing", jobIDs(got))
	}
	before := h.snap(c.ID)
	q := h.reapOne(c.ID, 31*time.Second)
	if q.Status != lifecycle.StatusQueued || q.Attempt != 1 || q.Executions != 0 || len(q.Errors) != 0 || q.Rev != before.job.Rev+2 {
		h.t.Errorf("reaped claimed job: %s attempt %d executions %d errors %d rev %d→%d; want queued, attempt 1, executions 0, no errors, rev+2",
			q.Status, q.Attempt, q.Executions, len(q.Errors), before.job.Rev, q.Rev)
	}
	if !q.RunAt.Equal(h.tm(31 * time.Second)) {
		h.t.Errorf("reaped job run_at = %s, want the reap's Now %s", fmtTime(q.RunAt), fmtTime(h.tm(31*time.Second)))
	}
	h.wantReapEvents(q, lifecycle.StatusClaimed, len(before.events))
	// The stalled claim did not use the budget of one execution.
	c2 := h.mustClaim(32 * time.Second)
	r := h.mustStart(c2, 33*time.Second)
	s := h.mustComplete(r, 34*time.Second, json.RawMessage(`{}`))
	if s.Attempt != 2 || s.Executions != 1 {
		h.t.Errorf("succeeded: attempt %d executions %d, want 2 and 1", s.Attempt, s.Executions)
	}
}

func testReapRunning(h *harness) {
	r := h.runningJob(nil) // max_attempts 3; lease until t0+30s (start keeps it)
	before := h.snap(r.ID)
	q := h.reapOne(r.ID, 31*time.Second)
	if q.Status != lifecycle.StatusQueued || q.Attempt != 1 || q.Executions != 1 || q.Error != "" {
		h.t.Errorf("reaped running job: %s attempt %d executions %d error %q; want queued, attempt 1, executions 1, no final error",
			q.Status, q.Attempt, q.Executions, q.Error)
	}
	if len(q.Errors) != 1 || q.Errors[0].Attempt != 1 || q.Errors[0].Error == "" {
		h.t.Errorf("reaped running job: error history %+v, want one entry for attempt 1 saying why", q.Errors)
	}
	h.wantReapEvents(q, lifecycle.StatusRunning, len(before.events))
	c := h.mustClaim(32 * time.Second)
	if c.Attempt != 2 {
		h.t.Errorf("reclaim after reap: attempt %d, want 2", c.Attempt)
	}
}

func testReapRunningExhausted(h *harness) {
	r := h.runningJob(func(p *driver.InsertParams) { p.MaxAttempts = 1 })
	before := h.snap(r.ID)
	f := h.reapOne(r.ID, 31*time.Second)
	if f.Status != lifecycle.StatusFailed || f.Error == "" || len(f.Errors) != 1 || f.FinishedAt == nil {
		h.t.Errorf("reaped exhausted job: %s error %q errors %d finished %s; want failed with an error, one history entry, finished_at",
			f.Status, f.Error, len(f.Errors), fmtTimePtr(f.FinishedAt))
	}
	h.wantReapEvents(f, lifecycle.StatusRunning, len(before.events))
}

func testReapOnlyExpired(h *harness) {
	queued := h.mustEnqueue(nil)
	claimed := h.claimedJob(nil)             // lease until t0+30s
	beating := h.runningJob(nil)             // lease until t0+30s …
	h.mustHeartbeat(beating, 20*time.Second) // … now t0+50s
	done := h.runningJob(nil)                // finished: never reaped
	h.mustComplete(done, 2*time.Second, nil)
	snaps := []snapshot{h.snap(queued.ID), h.snap(beating.ID), h.snap(done.ID)}
	got := h.reapOne(claimed.ID, 40*time.Second)
	if got.Status != lifecycle.StatusQueued {
		h.t.Errorf("reaped claimed job is %s, want queued", got.Status)
	}
	for _, s := range snaps {
		h.wantUnchanged(s, "JobReapExpired at t0+40s")
	}
	h.reapOne(beating.ID, 51*time.Second)
	if again := h.mustReap(52 * time.Second); len(again) != 0 {
		h.t.Errorf("second reap took %v, want nothing", jobIDs(again))
	}
}

// A heartbeat never moves a lease's end earlier (DESIGN's heartbeat "extends"
// the lease): one that asks for a shorter lease than the claim gave keeps the
// claim's end until now + the shorter lease passes it.
func testHeartbeatNeverShortens(h *harness) {
	j := h.mustEnqueue(nil)
	c := h.mustClaimOne(driver.ClaimParams{Queues: []string{j.Queue}, ID: j.ID, Limit: 1, Owner: owner,
		LeaseDuration: time.Hour, Now: h.at(0)})
	beat := func(now, lease, want time.Duration) {
		h.t.Helper()
		p := driver.HeartbeatParams{FenceParams: fence(c, h.at(now))}
		p.LeaseDuration = lease
		res, err := h.d.JobHeartbeat(h.ctx, p)
		if err != nil || !res.LeaseExpiresAt.Equal(h.tm(want)) {
			h.t.Fatalf("JobHeartbeat at t0+%s with a %s lease = %+v, %v; want the lease until t0+%s", now, lease, res, err, want)
		}
		if got := h.get(c.ID).LeaseExpiresAt; got == nil || !got.Equal(h.tm(want)) {
			h.t.Fatalf("JobHeartbeat at t0+%s with a %s lease: stored lease_expires_at %s, want t0+%s", now, lease, fmtTimePtr(got), want)
		}
	}
	// A heartbeat with a shorter lease than the one held keeps it: the holder
	// times its give-up by the lease it last heard of, and a heartbeat whose
	// answer was lost must not have moved the lease's end before that.
	beat(time.Second, 10*time.Second, time.Hour)
	if got := h.mustReap(12 * time.Second); len(got) != 0 {
		h.t.Fatalf("reap at t0+12s took %v, want nothing (the lease runs until t0+1h)", jobIDs(got))
	}
	// Once now + the shorter lease passes the old end, it extends from there.
	beat(time.Hour-5*time.Second, 10*time.Second, time.Hour+5*time.Second)
	if got := h.mustReap(time.Hour + 4*time.Second); len(got) != 0 {
		h.t.Fatalf("reap at t0+1h4s took %v, want nothing (the lease runs until t0+1h5s)", jobIDs(got))
	}
	h.reapOne(c.ID, time.Hour+6*time.Second)
}

// Jobs claimed together have different fates: one completes, one is extended by
// heartbeats, one is left to expire. Each is reaped by its own lease, and once
// every lease has ended the reaper finds nothing more to do.
func testReapBatchClaim(h *harness) {
	jobs := h.runningBatch(3)
	done, beating, dead := jobs[0], jobs[1], jobs[2]
	h.mustComplete(done, time.Second, nil)
	h.mustHeartbeat(beating, 25*time.Second) // until t0+55s
	h.reapOne(dead.ID, 31*time.Second)
	if got := h.mustReap(50 * time.Second); len(got) != 0 {
		h.t.Fatalf("reap at t0+50s took %v, want nothing (the heartbeat holds until t0+55s)", jobIDs(got))
	}
	h.mustHeartbeat(beating, 50*time.Second) // until t0+80s
	if got := h.mustReap(60 * time.Second); len(got) != 0 {
		h.t.Fatalf("reap at t0+60s took %v, want nothing (the heartbeat holds until t0+80s)", jobIDs(got))
	}
	h.reapOne(beating.ID, 81*time.Second)
	if got := h.mustReap(time.Hour); len(got) != 0 {
		h.t.Fatalf("reap an hour later took %v, want nothing", jobIDs(got))
	}
}
