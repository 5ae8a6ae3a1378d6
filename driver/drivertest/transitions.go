package drivertest

import (
	"encoding/json"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// transitionTests walk every allowed edge of lifecycle.Transitions that the driver
// interface exposes.
var transitionTests = []suiteTest{
	{"RetryOrSnoozeTimeOutOfRangeRefused", testRetrySnoozeTimeRange},
	{"EnqueueQueued", testEnqueueQueued},
	{"EnqueuePending", testEnqueuePending},
	{"ClaimStartComplete", testClaimStartComplete},
	{"CompleteNilResultIsJSONNull", testCompleteNilResult},
	{"Unclaim", testUnclaim},
	{"HeartbeatClaimedAndRunning", testHeartbeat},
	{"RetryThenFailWhenExhausted", testRetryThenFail},
	{"FailPermanent", testFailPermanent},
	{"FailMaxAttemptsOne", testFailMaxAttemptsOne},
	{"FailTextNotUTF8", testFailTextNotUTF8},
	{"SnoozeGivesExecutionBack", testSnooze},
	{"CancelQueued", func(h *harness) { h.mustCancel(h.mustEnqueue(nil).ID, time.Second) }},
	{"CancelPending", func(h *harness) {
		run := int64(42)
		j := h.mustEnqueue(func(p *driver.InsertParams) { p.WorkflowRunID, p.WorkflowNode = &run, "extract" })
		h.mustCancel(j.ID, time.Second)
	}},
	{"CancelClaimed", testCancelClaimed},
	{"CancelRunning", testCancelRunning},
	{"StartWithLeaseDuration", testStartLease},
}

func testEnqueueQueued(h *harness) {
	j := h.mustEnqueue(func(p *driver.InsertParams) { p.RunAt = nil })
	if j.Rev < 1 {
		h.t.Errorf("new job rev = %d, want >= 1", j.Rev)
	}
	if j.Owner != "" || j.LeaseToken != "" || j.StartedAt != nil || j.FinishedAt != nil || len(j.Errors) != 0 {
		h.t.Errorf("new job has owner %q token %q started %s finished %s errors %d, want none",
			j.Owner, j.LeaseToken, fmtTimePtr(j.StartedAt), fmtTimePtr(j.FinishedAt), len(j.Errors))
	}
}

func testEnqueuePending(h *harness) {
	run := int64(7)
	j := h.mustEnqueue(func(p *driver.InsertParams) { p.WorkflowRunID, p.WorkflowNode = &run, "load" })
	if j.WorkflowRunID == nil || *j.WorkflowRunID != run || j.WorkflowNode != "load" {
		h.t.Errorf("pending job workflow_run_id %s node %q, want 7 \"load\"", fmtInt64Ptr(j.WorkflowRunID), j.WorkflowNode)
	}
	p := h.claimParams(time.Hour)
	p.Limit = 10
	h.mustClaimNone(p)
	p.ID = j.ID
	h.mustClaimNone(p)
	if got := h.get(j.ID).Status; got != lifecycle.StatusPending {
		h.t.Errorf("after claims, pending job is %s, want pending", got)
	}
}

func testClaimStartComplete(h *harness) {
	j := h.mustEnqueue(nil)
	c := h.mustClaim(0)
	if c.ID != j.ID || c.Attempt != 1 || c.Executions != 0 {
		h.t.Fatalf("claim: job %d attempt %d executions %d, want job %d attempt 1 executions 0", c.ID, c.Attempt, c.Executions, j.ID)
	}
	r := h.mustStart(c, time.Second)
	if r.Executions != 1 {
		h.t.Errorf("start: executions = %d, want 1", r.Executions)
	}
	s := h.mustComplete(r, 2*time.Second, json.RawMessage(`{"ok":true,"n":[1,2]}`))
	if s.Owner != "" || s.LeaseToken != "" || s.LeaseExpiresAt != nil || s.Error != "" {
		h.t.Errorf("succeeded job keeps owner %q token %q expiry %s error %q", s.Owner, s.LeaseToken, fmtTimePtr(s.LeaseExpiresAt), s.Error)
	}
	if evs := h.events(j.ID); len(evs) != 4 {
		h.t.Errorf("events = %s, want enqueued claimed started succeeded", fmtEvents(evs))
	}
}

func testCompleteNilResult(h *harness) {
	r := h.runningJob(nil)
	s := h.mustComplete(r, 2*time.Second, nil)
	if string(s.Result) != "null" && !jsonEqual(s.Result, json.RawMessage("null")) {
		h.t.Errorf("result = %q, want JSON null", s.Result)
	}
}

func testUnclaim(h *harness) {
	// max_attempts 1: an unclaimed attempt must not use up the budget.
	h.mustEnqueue(func(p *driver.InsertParams) { p.MaxAttempts = 1 })
	c := h.mustClaim(0)
	u := h.mustUnclaim(c, time.Second)
	if u.Owner != "" || u.LeaseToken != "" || u.LeaseExpiresAt != nil || u.Executions != 0 || u.Attempt != 1 {
		h.t.Errorf("unclaimed job: owner %q token %q expiry %s executions %d attempt %d, want no lease, executions 0, attempt 1",
			u.Owner, u.LeaseToken, fmtTimePtr(u.LeaseExpiresAt), u.Executions, u.Attempt)
	}
	c2 := h.mustClaim(2 * time.Second)
	if c2.ID != c.ID || c2.Attempt != 2 || c2.LeaseToken == c.LeaseToken {
		h.t.Errorf("reclaim: job %d attempt %d (token reused %v), want job %d attempt 2 with a new token", c2.ID, c2.Attempt, c2.LeaseToken == c.LeaseToken, c.ID)
	}
	r := h.mustStart(c2, 3*time.Second)
	h.mustComplete(r, 4*time.Second, json.RawMessage(`1`))
}

func testHeartbeat(h *harness) {
	c := h.claimedJob(nil)
	h.mustHeartbeat(c, 10*time.Second)
	h.mustHeartbeat(c, 20*time.Second)
	r := h.mustStart(c, 25*time.Second)
	h.mustHeartbeat(r, 40*time.Second)
	// Heartbeats bumped rev without events; the next transition's seq is the new rev.
	h.mustComplete(r, 50*time.Second, json.RawMessage(`{}`))
}

func testRetryThenFail(h *harness) {
	j := h.runningJob(nil) // max_attempts 3
	q := h.mustFail(j, failParams(h.at(2*time.Second), "boom 1", h.tm(time.Hour), false), lifecycle.StatusQueued)
	if q.Error != "" || q.Executions != 1 {
		h.t.Errorf("retried job: error %q executions %d, want no final error and executions 1", q.Error, q.Executions)
	}
	p := h.claimParams(time.Hour - time.Millisecond)
	h.mustClaimNone(p)
	c := h.mustClaim(time.Hour)
	if c.Attempt != 2 {
		h.t.Errorf("second claim: attempt %d, want 2", c.Attempt)
	}
	r := h.mustStart(c, time.Hour+time.Second)
	h.mustFail(r, failParams(h.at(time.Hour+2*time.Second), "boom 2", h.tm(2*time.Hour), false), lifecycle.StatusQueued)
	c = h.mustClaim(2 * time.Hour)
	r = h.mustStart(c, 2*time.Hour+time.Second)
	if r.Executions != 3 {
		h.t.Errorf("third start: executions %d, want 3", r.Executions)
	}
	f := h.mustFail(r, failParams(h.at(2*time.Hour+2*time.Second), "boom 3", h.tm(3*time.Hour), false), lifecycle.StatusFailed)
	if len(f.Errors) != 3 || f.Errors[0].Error != "boom 1" || f.Errors[1].Error != "boom 2" || f.Errors[2].Error != "boom 3" {
		h.t.Errorf("error history = %+v, want boom 1, boom 2, boom 3 in order", f.Errors)
	}
	for i, e := range f.Errors {
		if e.Attempt != i+1 {
			h.t.Errorf("error history entry %d has attempt %d, want %d", i, e.Attempt, i+1)
		}
	}
}

func testFailPermanent(h *harness) {
	j := h.runningJob(func(p *driver.InsertParams) { p.MaxAttempts = 5 })
	h.mustFail(j, failParams(h.at(2*time.Second), "bad input", h.tm(time.Hour), true), lifecycle.StatusFailed)
}

func testFailMaxAttemptsOne(h *harness) {
	j := h.runningJob(func(p *driver.InsertParams) { p.MaxAttempts = 1 })
	f := h.mustFail(j, failParams(h.at(2*time.Second), "boom", h.tm(time.Hour), false), lifecycle.StatusFailed)
	if f.Executions != 1 || f.Attempt != 1 {
		h.t.Errorf("failed job: executions %d attempt %d, want 1 and 1", f.Executions, f.Attempt)
	}
}

// A failure's text is the handler's error, which may hold any bytes: NULs and
// bytes that are not UTF-8 are stored replaced (driver.CleanText), never
// refused, and alike on every driver. PostgreSQL refused such text, so the
// failure could not be recorded at all.
func testFailTextNotUTF8(h *harness) {
	j := h.runningJob(func(p *driver.InsertParams) { p.MaxAttempts = 5 })
	p := failParams(h.at(2*time.Second), "upstream said \xff\xfe, then \x00", h.tm(time.Hour), true)
	p.Stack = "frame \xc3\n"
	p.FenceParams.ID, p.FenceParams.Attempt, p.FenceParams.LeaseToken = j.ID, j.Attempt, j.LeaseToken
	r, err := h.d.JobFail(h.ctx, p)
	if err != nil {
		h.t.Fatalf("JobFail with text that is not UTF-8: %v", err)
	}
	const wantErr, wantStack = "upstream said \uFFFD, then \uFFFD", "frame \uFFFD\n"
	if r.Status != lifecycle.StatusFailed || r.Error != wantErr || len(r.Errors) != 1 ||
		r.Errors[0].Error != wantErr || r.Errors[0].Stack != wantStack {
		h.t.Errorf("failed job: status %s error %q errors %+v; want failed, error %q, stack %q", r.Status, r.Error, r.Errors, wantErr, wantStack)
	}
	if g := h.get(j.ID); g.Error != wantErr {
		h.t.Errorf("stored error %q, want %q", g.Error, wantErr)
	}

	// An empty message is stored as the same stand-in on every driver.
	e := h.runningJob(nil)
	p = failParams(h.at(3*time.Second), "", h.tm(time.Hour), true)
	p.FenceParams.ID, p.FenceParams.Attempt, p.FenceParams.LeaseToken = e.ID, e.Attempt, e.LeaseToken
	if r, err := h.d.JobFail(h.ctx, p); err != nil || r.Error != "unknown error" {
		h.t.Errorf("JobFail with an empty error: %v, %v; want error \"unknown error\"", err, r)
	}
}

func testSnooze(h *harness) {
	j := h.runningJob(func(p *driver.InsertParams) { p.MaxAttempts = 1 })
	q := h.mustSnooze(j, 2*time.Second, h.tm(10*time.Minute))
	if q.Executions != 0 {
		h.t.Errorf("snoozed job: executions %d, want 0 (given back)", q.Executions)
	}
	h.mustClaimNone(h.claimParams(10*time.Minute - time.Millisecond))
	c := h.mustClaim(10 * time.Minute)
	r := h.mustStart(c, 10*time.Minute+time.Second)
	s := h.mustComplete(r, 10*time.Minute+2*time.Second, json.RawMessage(`"done"`))
	if s.Attempt != 2 || s.Executions != 1 {
		h.t.Errorf("succeeded after snooze: attempt %d executions %d, want 2 and 1", s.Attempt, s.Executions)
	}
}

func testCancelClaimed(h *harness) {
	c := h.claimedJob(nil)
	x := h.mustCancel(c.ID, time.Second)
	if x.Owner != "" || x.LeaseToken != "" || x.LeaseExpiresAt != nil {
		h.t.Errorf("canceled job keeps its lease: owner %q token %q expiry %s", x.Owner, x.LeaseToken, fmtTimePtr(x.LeaseExpiresAt))
	}
	h.rejected(c.ID, driver.ErrLeaseLost, "JobStart after cancel", func() error {
		_, err := h.d.JobStart(h.ctx, fence(c, h.at(2*time.Second)))
		return err
	})
}

func testCancelRunning(h *harness) {
	r := h.runningJob(nil)
	h.mustCancel(r.ID, 2*time.Second)
	// The worker learns of the cancel through its next heartbeat.
	before := h.snap(r.ID)
	p := driver.HeartbeatParams{FenceParams: fence(r, h.at(3*time.Second))}
	p.LeaseDuration = leaseDuration
	res, err := h.d.JobHeartbeat(h.ctx, p)
	if err != nil || !res.CancelRequested {
		h.t.Errorf("JobHeartbeat after cancel = %+v, %v; want CancelRequested = true and no error", res, err)
	}
	h.wantUnchanged(before, "JobHeartbeat of a canceled job")
	h.rejected(r.ID, driver.ErrLeaseLost, "JobComplete after cancel", func() error {
		_, err := h.d.JobComplete(h.ctx, driver.CompleteParams{FenceParams: fence(r, h.at(4*time.Second)), Result: json.RawMessage(`1`)})
		return err
	})
	h.rejected(r.ID, driver.ErrLeaseLost, "JobFail after cancel", func() error {
		_, err := h.d.JobFail(h.ctx, failParams2(r, h.at(4*time.Second)))
		return err
	})
}

func failParams2(j *driver.Job, now *time.Time) driver.FailParams {
	p := failParams(now, "late", now.Add(time.Hour), false)
	p.FenceParams = fence(j, now)
	return p
}

func testStartLease(h *harness) {
	c := h.claimedJob(nil) // lease until t0+30s
	p := fence(c, h.at(5*time.Second))
	p.LeaseDuration = time.Minute
	r, err := h.d.JobStart(h.ctx, p)
	if err != nil {
		h.t.Fatalf("JobStart: %v", err)
	}
	if want := h.tm(65 * time.Second); r.LeaseExpiresAt == nil || !r.LeaseExpiresAt.Equal(want) {
		h.t.Errorf("JobStart with LeaseDuration 1m at t0+5s: lease_expires_at %s, want %s", fmtTimePtr(r.LeaseExpiresAt), fmtTime(want))
	}
	// LeaseDuration 0 keeps the current expiry.
	c2 := h.claimedJob(nil)
	r2 := h.mustStart(c2, 5*time.Second)
	if r2.LeaseExpiresAt == nil || !r2.LeaseExpiresAt.Equal(*c2.LeaseExpiresAt) {
		h.t.Errorf("JobStart with LeaseDuration 0: lease_expires_at %s, want the claim's %s", fmtTimePtr(r2.LeaseExpiresAt), fmtTimePtr(c2.LeaseExpiresAt))
	}
}

// testRetrySnoozeTimeRange: a retry or a snooze to a time outside the years
// 1970 to 9999 (in UTC) is refused, naming the field, as an insert's run_at
// is. One past 9999 was stored on both drivers, and the job could not be
// encoded as JSON after that: GET /jobs/{id} failed on it.
func testRetrySnoozeTimeRange(h *harness) {
	j := h.runningJob(nil)
	west := time.FixedZone("UTC-5", -5*3600)
	for _, at := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 0, 0, 0, west), // year 10000 in UTC
		time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC),
	} {
		h.rejected(j.ID, driver.ErrInvalidArgument, "JobFail with RetryAt "+at.String(), func() error {
			_, err := h.d.JobFail(h.ctx, driver.FailParams{FenceParams: fence(j, h.at(2*time.Second)), Error: "boom", RetryAt: at})
			return h.namingField("JobFail", "retry_at", err)
		})
		h.rejected(j.ID, driver.ErrInvalidArgument, "JobSnooze with RunAt "+at.String(), func() error {
			_, err := h.d.JobSnooze(h.ctx, driver.SnoozeParams{FenceParams: fence(j, h.at(2*time.Second)), RunAt: at})
			return h.namingField("JobSnooze", "run_at", err)
		})
	}
}
