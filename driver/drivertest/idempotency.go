package drivertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// requestIDTests: repeating a transition with a request_id the job's log holds
// returns the job as it is now with Replayed = true; rev, attempt and the log stay.
var requestIDTests = []suiteTest{
	{"Claim", testReplayClaim},
	{"Start", testReplayStart},
	{"Complete", testReplayComplete},
	{"FailRetry", testReplayFailRetry},
	{"FailFinal", testReplayFailFinal},
	{"Snooze", testReplaySnooze},
	{"Unclaim", testReplayUnclaim},
	{"Cancel", testReplayCancel},
	{"Heartbeat", testReplayHeartbeat},
	{"ReplayAfterTheJobMovedOn", testReplayLater},
	{"SameRequestIDOnAnotherJob", testReplayOtherJob},
	{"SameRequestIDAtAnotherAttempt", testReplayOtherAttempt},
	{"CancelWithAnotherCallsRequestID", testReplayCancelOfAnotherCall},
	{"ReportWithAnotherCallsRequestID", testReplayOfAnotherKindOfCall},
	{"HeartbeatRepeatAfterTheJobMovedOn", testReplayHeartbeatLater},
	{"StartRepeatAfterTheLeaseMovedOn", testReplayStartAfterLease},
	{"ReportRepeatDuringALaterAttempt", testReplayReportDuringLaterAttempt},
	{"ClaimWithAnotherWorkersRequestID", testClaimRequestOfAnotherWorker},
	{"HeartbeatRepeatWithTheTokenInCapitals", testReplayHeartbeatTokenCase},
	{"ClaimWithARequestIDInACandidatesLog", testClaimRequestInALog},
	{"WithANULRefused", testRequestIDWithNUL},
}

// testRequestIDWithNUL: a request_id with a NUL character, which PostgreSQL
// cannot store, or longer than driver.MaxRequestIDBytes, is refused on every
// driver with a ValidationError naming request_id, and changes nothing, in
// every lease holder's call and a cancel; in a batch completion it is refused
// alone and the batch goes on. PostgreSQL answered a database error (22021)
// for each call with a NUL and failed the whole JobCompleteMany batch with
// it; SQLite stored the request_id. Both stored a request_id of 100 kB,
// which the HTTP API refused (PostgreSQL's index takes this one only because
// it compresses well).
func testRequestIDWithNUL(h *harness) {
	for _, bad := range []struct{ id, what string }{
		{"req\x00uest", "a NUL in request_id"},
		{strings.Repeat("r", driver.MaxRequestIDBytes+1), fmt.Sprintf("a request_id of %d bytes", driver.MaxRequestIDBytes+1)},
		{strings.Repeat("r", 100_000), "a request_id of 100000 bytes"},
	} {
		testRequestIDRefused(h, bad.id, bad.what)
		// A claim too, which would keep it in drover_claim_requests.
		q := h.mustEnqueue(nil)
		h.rejected(q.ID, driver.ErrInvalidArgument, "JobClaim with "+bad.what, func() error {
			_, err := h.d.JobClaim(h.ctx, driver.ClaimParams{Queues: []string{q.Queue}, ID: q.ID, Limit: 1, Owner: owner,
				LeaseDuration: leaseDuration, Now: h.at(0), RequestID: bad.id})
			return h.namingField("JobClaim", "request_id", err)
		})
	}
	// The longest allowed is taken.
	j := h.claimedJob(nil)
	f := fence(j, h.at(2*time.Second))
	f.RequestID = strings.Repeat("r", driver.MaxRequestIDBytes)
	if _, err := h.d.JobStart(h.ctx, f); err != nil {
		h.t.Errorf("JobStart with a request_id of %d bytes, the most allowed: %v", driver.MaxRequestIDBytes, err)
	}
}

func testRequestIDRefused(h *harness, bad, what string) {
	withReq := func(j *driver.Job) driver.FenceParams {
		f := fence(j, h.at(2*time.Second))
		f.RequestID = bad
		return f
	}
	claimed, running := h.claimedJob(nil), h.runningJob(nil)
	calls := []struct {
		name string
		job  *driver.Job
		call func(j *driver.Job) error
	}{
		{"JobStart", claimed, func(j *driver.Job) error { _, err := h.d.JobStart(h.ctx, withReq(j)); return err }},
		{"JobUnclaim", claimed, func(j *driver.Job) error { _, err := h.d.JobUnclaim(h.ctx, withReq(j)); return err }},
		{"JobHeartbeat", running, func(j *driver.Job) error {
			_, err := h.d.JobHeartbeat(h.ctx, driver.HeartbeatParams{FenceParams: withReq(j)})
			return err
		}},
		{"JobComplete", running, func(j *driver.Job) error {
			_, err := h.d.JobComplete(h.ctx, driver.CompleteParams{FenceParams: withReq(j)})
			return err
		}},
		{"JobFail", running, func(j *driver.Job) error {
			_, err := h.d.JobFail(h.ctx, driver.FailParams{FenceParams: withReq(j), Error: "boom"})
			return err
		}},
		{"JobSnooze", running, func(j *driver.Job) error {
			_, err := h.d.JobSnooze(h.ctx, driver.SnoozeParams{FenceParams: withReq(j)})
			return err
		}},
		{"JobCancel", running, func(j *driver.Job) error {
			_, err := h.d.JobCancel(h.ctx, driver.CancelParams{ID: j.ID, RequestID: bad, Now: h.at(2 * time.Second)})
			return err
		}},
	}
	for _, c := range calls {
		h.rejected(c.job.ID, driver.ErrInvalidArgument, c.name+" with "+what, func() error {
			return h.namingField(c.name, "request_id", c.call(c.job))
		})
	}
	// A batch completion: the bad one is refused alone.
	other := h.runningJob(nil)
	for _, errsOnly := range []bool{false, true} {
		ps := []driver.CompleteParams{{FenceParams: withReq(running)}}
		if !errsOnly {
			ps = append(ps, driver.CompleteParams{FenceParams: fence(other, h.at(3*time.Second))})
		}
		var errs []error
		if errsOnly {
			errs = h.d.JobCompleteManyErrs(h.ctx, ps)
		} else {
			errs = driver.OutcomeErrs(h.d.JobCompleteMany(h.ctx, ps))
		}
		h.wantErr(errs[0], driver.ErrInvalidArgument, fmt.Sprintf("JobCompleteMany (errs only %v): the completion with %s", errsOnly, what))
		h.namingField("JobCompleteMany", "request_id", errs[0])
		if len(errs) > 1 && errs[1] != nil {
			h.t.Errorf("JobCompleteMany: the other completion of the batch failed with it: %v", errs[1])
		}
	}
	if j := h.get(running.ID); j.Status != lifecycle.StatusRunning {
		h.t.Errorf("job %d is %s after completions refused, want running", j.ID, j.Status)
	}
	if j := h.get(other.ID); j.Status != lifecycle.StatusSucceeded {
		h.t.Errorf("job %d is %s, want succeeded: its completion shared a batch with a refused one", j.ID, j.Status)
	}
}

// wantReplay runs call, which repeats a request already applied to job id.
func (h *harness) wantReplay(id int64, what string, call func() (*driver.Job, error)) *driver.Job {
	h.t.Helper()
	return h.wantReplayAt(id, 0, what, call)
}

// wantReplayAt is wantReplay of a lease holder's call at attempt: the job it
// answers holds no lease token of another attempt (driver.RepeatAnswer).
func (h *harness) wantReplayAt(id int64, attempt int, what string, call func() (*driver.Job, error)) *driver.Job {
	h.t.Helper()
	before := h.snap(id)
	want := *before.job
	if attempt > 0 && want.Status.Leased() && want.Attempt != attempt {
		want.LeaseToken = ""
	}
	j, err := call()
	if err != nil {
		h.t.Fatalf("%s (repeat of an applied request_id): %v; want the first answer", what, err)
	}
	if j == nil {
		h.t.Fatalf("%s (repeat): nil job", what)
	}
	if !j.Replayed {
		h.t.Errorf("%s (repeat): Replayed = false, want true", what)
	}
	if d := diffJobs(&want, j); d != "" {
		h.t.Errorf("%s (repeat): returned job differs from the job as it is: %s", what, d)
	}
	h.wantUnchanged(before, what+" (repeat)")
	return j
}

// wantRequestID checks the last event of job id carries reqID.
func (h *harness) wantRequestID(id int64, reqID string) {
	h.t.Helper()
	evs := h.events(id)
	if len(evs) == 0 || evs[len(evs)-1].RequestID != reqID {
		h.t.Errorf("job %d events %s: want the last one to carry request_id %q", id, fmtEvents(evs), reqID)
	}
}

func testReplayClaim(h *harness) {
	h.mustEnqueue(nil)
	second := h.mustEnqueue(nil)
	p := h.claimParams(0)
	p.RequestID = "claim-1"
	first := h.mustClaimOne(p)
	h.wantRequestID(first.ID, "claim-1")
	before := []snapshot{h.snap(first.ID), h.snap(second.ID)}
	p.Now = h.at(time.Second)
	again, err := h.d.JobClaim(h.ctx, p)
	if err != nil {
		h.t.Fatalf("JobClaim repeat: %v", err)
	}
	if len(again) != 1 || again[0].ID != first.ID || !again[0].Replayed || again[0].LeaseToken != first.LeaseToken || again[0].Attempt != first.Attempt {
		h.t.Fatalf("JobClaim repeat = %v, want job %d again (Replayed, same token and attempt %d)", jobIDs(again), first.ID, first.Attempt)
	}
	if d := diffJobs(first, again[0]); d != "" {
		h.t.Errorf("JobClaim repeat: job differs from the first answer: %s", d)
	}
	for _, s := range before {
		h.wantUnchanged(s, "JobClaim repeat")
	}
}

func testReplayStart(h *harness) {
	c := h.claimedJob(nil)
	p := fence(c, h.at(time.Second))
	p.RequestID = "start-1"
	r := h.transition("JobStart", c.ID, lifecycle.EventStarted, lifecycle.StatusRunning, func() (*driver.Job, error) { return h.d.JobStart(h.ctx, p) })
	h.wantRequestID(c.ID, "start-1")
	j := h.wantReplay(c.ID, "JobStart", func() (*driver.Job, error) { return h.d.JobStart(h.ctx, p) })
	if j.Executions != r.Executions {
		h.t.Errorf("JobStart repeat: executions %d, want %d", j.Executions, r.Executions)
	}
}

func testReplayComplete(h *harness) {
	r := h.runningJob(nil)
	p := driver.CompleteParams{FenceParams: fence(r, h.at(2*time.Second)), Result: json.RawMessage(`{"v":1}`)}
	p.RequestID = "complete-1"
	h.transition("JobComplete", r.ID, lifecycle.EventSucceeded, lifecycle.StatusSucceeded, func() (*driver.Job, error) { return h.d.JobComplete(h.ctx, p) })
	h.wantRequestID(r.ID, "complete-1")
	p.Result = json.RawMessage(`{"v":2}`) // a repeat does not overwrite the stored outcome
	j := h.wantReplay(r.ID, "JobComplete", func() (*driver.Job, error) { return h.d.JobComplete(h.ctx, p) })
	if !jsonEqual(j.Result, json.RawMessage(`{"v":1}`)) {
		h.t.Errorf("JobComplete repeat: result %s, want the first {\"v\":1}", j.Result)
	}
	// JobCompleteMany replays too.
	outs := h.d.JobCompleteMany(h.ctx, []driver.CompleteParams{p})
	if len(outs) != 1 || outs[0].Err != nil || outs[0].Job == nil || !outs[0].Job.Replayed {
		h.t.Errorf("JobCompleteMany repeat of complete-1 = %+v, want the job with Replayed = true", outs)
	}
	// JobCompleteManyErrs answers a replay as done, and changes nothing.
	if errs := h.d.JobCompleteManyErrs(h.ctx, []driver.CompleteParams{p}); len(errs) != 1 || errs[0] != nil {
		h.t.Errorf("JobCompleteManyErrs repeat of complete-1 = %v, want one nil error", errs)
	}
	if g := h.get(r.ID); g.Rev != j.Rev || !jsonEqual(g.Result, json.RawMessage(`{"v":1}`)) {
		h.t.Errorf("after the JobCompleteManyErrs repeat: rev %d result %s, want rev %d and {\"v\":1}", g.Rev, g.Result, j.Rev)
	}
}

func testReplayFailRetry(h *harness) {
	r := h.runningJob(nil)
	p := failParams2(r, h.at(2*time.Second))
	p.RequestID = "fail-1"
	q := h.transition("JobFail", r.ID, lifecycle.EventRetried, lifecycle.StatusQueued, func() (*driver.Job, error) { return h.d.JobFail(h.ctx, p) })
	h.wantRequestID(r.ID, "fail-1")
	j := h.wantReplay(r.ID, "JobFail (retry)", func() (*driver.Job, error) { return h.d.JobFail(h.ctx, p) })
	if len(j.Errors) != len(q.Errors) {
		h.t.Errorf("JobFail repeat: %d error entries, want %d (no second entry)", len(j.Errors), len(q.Errors))
	}
}

func testReplayFailFinal(h *harness) {
	r := h.runningJob(nil)
	p := failParams2(r, h.at(2*time.Second))
	p.Permanent, p.RequestID = true, "fail-final"
	h.transition("JobFail", r.ID, lifecycle.EventFailed, lifecycle.StatusFailed, func() (*driver.Job, error) { return h.d.JobFail(h.ctx, p) })
	h.wantReplay(r.ID, "JobFail (final)", func() (*driver.Job, error) { return h.d.JobFail(h.ctx, p) })
}

func testReplaySnooze(h *harness) {
	r := h.runningJob(nil)
	p := driver.SnoozeParams{FenceParams: fence(r, h.at(2*time.Second)), RunAt: h.tm(time.Hour)}
	p.RequestID = "snooze-1"
	h.transition("JobSnooze", r.ID, lifecycle.EventSnoozed, lifecycle.StatusQueued, func() (*driver.Job, error) { return h.d.JobSnooze(h.ctx, p) })
	j := h.wantReplay(r.ID, "JobSnooze", func() (*driver.Job, error) { return h.d.JobSnooze(h.ctx, p) })
	if j.Executions != 0 {
		h.t.Errorf("JobSnooze repeat: executions %d, want 0 (given back once, not twice)", j.Executions)
	}
}

func testReplayUnclaim(h *harness) {
	c := h.claimedJob(nil)
	p := fence(c, h.at(time.Second))
	p.RequestID = "unclaim-1"
	h.transition("JobUnclaim", c.ID, lifecycle.EventUnclaimed, lifecycle.StatusQueued, func() (*driver.Job, error) { return h.d.JobUnclaim(h.ctx, p) })
	h.wantReplay(c.ID, "JobUnclaim", func() (*driver.Job, error) { return h.d.JobUnclaim(h.ctx, p) })
}

func testReplayCancel(h *harness) {
	for _, j := range []*driver.Job{h.mustEnqueue(nil), h.claimedJob(nil), h.runningJob(nil)} {
		p := driver.CancelParams{ID: j.ID, RequestID: fmt.Sprintf("cancel-%d", j.ID), Actor: "operator", Now: h.at(5 * time.Second)}
		h.transition("JobCancel", j.ID, lifecycle.EventCanceled, lifecycle.StatusCanceled, func() (*driver.Job, error) { return h.d.JobCancel(h.ctx, p) })
		h.wantRequestID(j.ID, p.RequestID)
		// canceled is terminal, but a repeat is the first answer, not ErrInvalidTransition.
		h.wantReplay(j.ID, "JobCancel", func() (*driver.Job, error) { return h.d.JobCancel(h.ctx, p) })
	}
}

// testReplayHeartbeat: a heartbeat that carries a request_id is logged (one
// "heartbeat" event, seq = rev) so that a repeat is recognised: the repeat answers
// like the first and changes nothing, not even rev.
func testReplayHeartbeat(h *harness) {
	for _, j := range []*driver.Job{h.claimedJob(nil), h.runningJob(nil)} {
		p := driver.HeartbeatParams{FenceParams: fence(j, h.at(10*time.Second))}
		p.LeaseDuration, p.RequestID = leaseDuration, fmt.Sprintf("hb-%d", j.ID)
		n := len(h.events(j.ID))
		first, err := h.d.JobHeartbeat(h.ctx, p)
		if err != nil {
			h.t.Fatalf("JobHeartbeat: %v", err)
		}
		if evs := h.events(j.ID); len(evs)-n != 1 {
			h.t.Errorf("JobHeartbeat with a request_id appended %d events %s, want one heartbeat event", len(evs)-n, fmtEvents(evs[n:]))
		} else {
			h.wantLastEvent(h.get(j.ID), lifecycle.EventHeartbeat, j.Status, n+1)
			h.wantRequestID(j.ID, p.RequestID)
		}
		before := h.snap(j.ID)
		again, err := h.d.JobHeartbeat(h.ctx, p)
		if err != nil || !again.LeaseExpiresAt.Equal(first.LeaseExpiresAt) || again.CancelRequested {
			h.t.Errorf("JobHeartbeat repeat = %+v, %v; want the first answer %+v", again, err, first)
		}
		after := h.snap(j.ID)
		if len(after.events) != len(before.events) || after.job.Rev != before.job.Rev || after.job.Status != j.Status ||
			after.job.Attempt != j.Attempt || after.job.LeaseToken != j.LeaseToken || after.job.Executions != j.Executions {
			h.t.Errorf("JobHeartbeat repeat changed job %d: %s; events %d → %d", j.ID, diffJobs(before.job, after.job), len(before.events), len(after.events))
		}
	}
}

func testReplayLater(h *harness) {
	c := h.claimedJob(nil)
	sp := fence(c, h.at(time.Second))
	sp.RequestID = "start-1"
	if _, err := h.d.JobStart(h.ctx, sp); err != nil {
		h.t.Fatalf("JobStart: %v", err)
	}
	cp := driver.CompleteParams{FenceParams: fence(c, h.at(2*time.Second)), Result: json.RawMessage(`1`)}
	cp.RequestID = "complete-1"
	if _, err := h.d.JobComplete(h.ctx, cp); err != nil {
		h.t.Fatalf("JobComplete: %v", err)
	}
	// A late retry of the start (say, its answer was lost) still gets an answer.
	j := h.wantReplay(c.ID, "JobStart after the job succeeded", func() (*driver.Job, error) { return h.d.JobStart(h.ctx, sp) })
	if j.Status != lifecycle.StatusSucceeded {
		h.t.Errorf("late JobStart repeat: job is %s, want succeeded (as it is now)", j.Status)
	}
	// A new request_id is a new call, refused.
	sp.RequestID = "start-2"
	h.rejected(c.ID, driver.ErrLeaseLost, "JobStart with a new request_id after success", func() error {
		_, err := h.d.JobStart(h.ctx, sp)
		return err
	})
}

// testReplayCancelOfAnotherCall: an operator's cancel whose request_id the
// job's log holds from another call (a lease holder's heartbeat) is not a
// repeat of that call: it is refused with an error naming request_id, and the
// job is unchanged, on every driver (PostgreSQL answered the event index's
// unique violation with a 500, and then both drivers answered it as a repeat,
// so the cancel was dropped while the caller was told it was done).
func testReplayCancelOfAnotherCall(h *harness) {
	r := h.runningJob(nil)
	hp := driver.HeartbeatParams{FenceParams: fence(r, h.at(2*time.Second))}
	hp.RequestID, hp.LeaseDuration = "shared-1", leaseDuration
	if _, err := h.d.JobHeartbeat(h.ctx, hp); err != nil {
		h.t.Fatalf("JobHeartbeat: %v", err)
	}
	h.refusedReused(r.ID, "JobCancel with the heartbeat's request_id", func() error {
		_, err := h.d.JobCancel(h.ctx, driver.CancelParams{ID: r.ID, RequestID: "shared-1", Actor: "operator", Now: h.at(3 * time.Second)})
		return err
	})
}

// testReplayOfAnotherKindOfCall: a request_id names one call. A lease
// holder's report that reuses the request_id of another call of the same
// attempt (its claim's, its heartbeat's) is refused with an error naming
// request_id and changes nothing, alone or in a batch; before, it was
// answered as a repeat of that call, and a completion that reused its claim's
// request_id was told it was done while the job stayed running (helper-38).
func testReplayOfAnotherKindOfCall(h *harness) {
	h.mustEnqueue(nil)
	p := h.claimParams(0)
	p.RequestID = "call-1"
	r := h.mustStart(h.mustClaimOne(p), time.Second)
	refusedOne := func(what string, call func() error) {
		h.t.Helper()
		h.refusedReused(r.ID, what, call)
	}
	cp := driver.CompleteParams{FenceParams: fence(r, h.at(2*time.Second)), Result: json.RawMessage(`1`)}
	cp.RequestID = "call-1"
	refusedOne("JobComplete with the claim's request_id", func() error { _, err := h.d.JobComplete(h.ctx, cp); return err })
	refusedOne("JobCompleteMany with the claim's request_id", func() error { return h.d.JobCompleteMany(h.ctx, []driver.CompleteParams{cp})[0].Err })
	fp := failParams2(r, h.at(2*time.Second))
	fp.RequestID = "call-1"
	refusedOne("JobFail with the claim's request_id", func() error { _, err := h.d.JobFail(h.ctx, fp); return err })
	sp := driver.SnoozeParams{FenceParams: fence(r, h.at(2*time.Second)), Delay: time.Second}
	sp.RequestID = "call-1"
	refusedOne("JobSnooze with the claim's request_id", func() error { _, err := h.d.JobSnooze(h.ctx, sp); return err })
	hp := driver.HeartbeatParams{FenceParams: fence(r, h.at(2*time.Second))}
	hp.RequestID, hp.LeaseDuration = "call-1", leaseDuration
	refusedOne("JobHeartbeat with the claim's request_id", func() error { _, err := h.d.JobHeartbeat(h.ctx, hp); return err })
	hp.RequestID = "beat-1"
	if _, err := h.d.JobHeartbeat(h.ctx, hp); err != nil {
		h.t.Fatalf("JobHeartbeat: %v", err)
	}
	cp.RequestID = "beat-1"
	refusedOne("JobComplete with the heartbeat's request_id", func() error { _, err := h.d.JobComplete(h.ctx, cp); return err })
	// With a request_id of its own it goes through.
	cp.RequestID = "complete-1"
	h.transition("JobComplete", r.ID, lifecycle.EventSucceeded, lifecycle.StatusSucceeded, func() (*driver.Job, error) { return h.d.JobComplete(h.ctx, cp) })
}

func testReplayOtherJob(h *harness) {
	a, b := h.mustEnqueue(nil), h.mustEnqueue(nil)
	for _, j := range []*driver.Job{a, b} {
		p := driver.CancelParams{ID: j.ID, RequestID: "same", Actor: "operator", Now: h.at(time.Second)}
		h.transition("JobCancel", j.ID, lifecycle.EventCanceled, lifecycle.StatusCanceled, func() (*driver.Job, error) { return h.d.JobCancel(h.ctx, p) })
	}
}

// testReplayHeartbeatLater: a heartbeat repeated after its attempt ended and
// the job was claimed again is answered with ErrLeaseLost, not with the new
// holder's lease, which told the stale holder its lease ran on (helper-37).
func testReplayHeartbeatLater(h *harness) {
	r := h.runningJob(nil)
	hp := driver.HeartbeatParams{FenceParams: fence(r, h.at(2*time.Second))}
	hp.RequestID, hp.LeaseDuration = "hb-1", leaseDuration
	if _, err := h.d.JobHeartbeat(h.ctx, hp); err != nil {
		h.t.Fatalf("JobHeartbeat: %v", err)
	}
	fp := failParams(h.at(3*time.Second), "try again", h.tm(4*time.Second), false)
	fp.FenceParams = fence(r, h.at(3*time.Second))
	h.transition("JobFail", r.ID, lifecycle.EventRetried, lifecycle.StatusQueued, func() (*driver.Job, error) { return h.d.JobFail(h.ctx, fp) })
	h.mustStart(h.mustClaimOne(driver.ClaimParams{ID: r.ID, Limit: 1, Owner: "other-worker", LeaseDuration: leaseDuration, Now: h.at(5 * time.Second)}), 6*time.Second)
	h.rejected(r.ID, driver.ErrLeaseLost, "JobHeartbeat of attempt 1 repeated during attempt 2", func() error {
		res, err := h.d.JobHeartbeat(h.ctx, hp)
		if err == nil {
			h.t.Logf("answered %+v", res)
		}
		return err
	})
}

// testReplayStartAfterLease: a start asks for its attempt's lease, so its
// repeat, once that lease ran out (the job stalled) or another worker claimed
// the job, is ErrLeaseLost, as a heartbeat's is. Both drivers answered it as
// a start that stood, with the job as it is now: stalled, or running under the
// other worker's attempt and lease token, which told the caller to run a job
// another worker may be running and handed it that worker's fence (helper-74).
func testReplayStartAfterLease(h *harness) {
	c := h.claimedJob(nil)
	sp := fence(c, h.at(time.Second))
	sp.RequestID = "start-a1"
	if _, err := h.d.JobStart(h.ctx, sp); err != nil {
		h.t.Fatalf("JobStart: %v", err)
	}
	h.mustReap(leaseDuration + 2*time.Second)
	h.rejected(c.ID, driver.ErrLeaseLost, "JobStart of attempt 1 repeated after its lease ran out", func() error {
		_, err := h.d.JobStart(h.ctx, sp)
		return err
	})
	other := h.mustClaimOne(driver.ClaimParams{ID: c.ID, Limit: 1, Owner: "other-worker", LeaseDuration: leaseDuration, Now: h.at(leaseDuration + 3*time.Second)})
	for _, started := range []bool{false, true} {
		if started {
			other = h.mustStart(other, leaseDuration+4*time.Second)
		}
		h.rejected(c.ID, driver.ErrLeaseLost, fmt.Sprintf("JobStart of attempt 1 repeated while attempt 2 is %s", other.Status), func() error {
			j, err := h.d.JobStart(h.ctx, sp)
			if err == nil && j != nil {
				h.t.Logf("answered job %d %s at attempt %d, the other worker's token: %v", j.ID, j.Status, j.Attempt, j.LeaseToken == other.LeaseToken)
			}
			return err
		})
	}
	// Its answer stays the job once the job has finished (ReplayAfterTheJobMovedOn).
}

// testReplayReportDuringLaterAttempt: the repeat of a report that gave the
// lease back (an unclaim, a fail the server retried, a snooze) answers the job
// as it is now, Replayed, and changes nothing, while a later attempt holds it:
// but without that attempt's lease token, which is another worker's fence.
func testReplayReportDuringLaterAttempt(h *harness) {
	calls := []struct {
		name    string
		running bool // the call's job is running, not only claimed
		call    func(p driver.FenceParams) (*driver.Job, error)
	}{
		{"JobUnclaim", false, func(p driver.FenceParams) (*driver.Job, error) { return h.d.JobUnclaim(h.ctx, p) }},
		{"JobFail", true, func(p driver.FenceParams) (*driver.Job, error) {
			fp := failParams(p.Now, "try again", *p.Now, false)
			fp.FenceParams = p
			return h.d.JobFail(h.ctx, fp)
		}},
		{"JobSnooze", true, func(p driver.FenceParams) (*driver.Job, error) {
			return h.d.JobSnooze(h.ctx, driver.SnoozeParams{FenceParams: p, RunAt: *p.Now})
		}},
	}
	for _, c := range calls {
		j := h.claimedJob(nil)
		if c.running {
			j = h.mustStart(j, time.Second)
		}
		p := fence(j, h.at(2*time.Second))
		p.RequestID = "report-" + c.name
		if _, err := c.call(p); err != nil {
			h.t.Fatalf("%s: %v", c.name, err)
		}
		h.mustClaimOne(driver.ClaimParams{ID: j.ID, Limit: 1, Owner: "other-worker", LeaseDuration: leaseDuration, Now: h.at(3 * time.Second)})
		h.wantReplayAt(j.ID, p.Attempt, c.name+" of attempt 1 repeated while attempt 2 holds the job", func() (*driver.Job, error) { return c.call(p) })
	}
}

// testReplayHeartbeatTokenCase: a heartbeat's repeat answers as the heartbeat
// did when its token is spelt in capitals. PostgreSQL's fence reads tokens as
// UUIDs and takes it, and the repeat compared them as strings and answered
// ErrLeaseLost (helper-40's R40-4). Both drivers' fences now take it
// (LeaseTokenInAnySpelling).
func testReplayHeartbeatTokenCase(h *harness) {
	r := h.runningJob(nil)
	hp := driver.HeartbeatParams{FenceParams: fence(r, h.at(2*time.Second))}
	hp.RequestID, hp.LeaseDuration, hp.LeaseToken = "hb-caps", leaseDuration, strings.ToUpper(r.LeaseToken)
	first, err1 := h.d.JobHeartbeat(h.ctx, hp)
	again, err2 := h.d.JobHeartbeat(h.ctx, hp)
	if (err1 == nil) != (err2 == nil) || !again.LeaseExpiresAt.Equal(first.LeaseExpiresAt) {
		h.t.Errorf("heartbeat with the token in capitals = %+v, %v; its repeat = %+v, %v; want the same answer", first, err1, again, err2)
	}
}

// testClaimRequestOfAnotherWorker: a claim's request_id is its worker's. A
// claim by another worker with it is refused naming request_id and claims
// nothing; answered as a repeat, it came back empty while jobs were ready,
// for as long as the first claim's events lived (helper-38).
func testClaimRequestOfAnotherWorker(h *harness) {
	h.mustEnqueue(nil)
	ready := h.mustEnqueue(nil)
	p := h.claimParams(0)
	p.RequestID = "claim-w1"
	h.mustClaimOne(p)
	p.Owner, p.Now = "worker-2", h.at(time.Second)
	what := "JobClaim by another worker with worker-1's request_id"
	h.refusedReused(ready.ID, what, func() error {
		_, err := h.d.JobClaim(h.ctx, p)
		return err
	})
}

// testClaimRequestInALog: a claim whose request_id the log of a job it would
// take holds from another call (a report) is refused naming request_id and
// claims nothing; it failed on the event index's uniqueness with an internal
// error, a 500 over HTTP (helper-38).
func testClaimRequestInALog(h *harness) {
	r := h.runningJob(nil)
	fp := failParams(h.at(2*time.Second), "again", h.tm(2*time.Second), false)
	fp.FenceParams = fence(r, h.at(2*time.Second))
	fp.RequestID = "used-1"
	h.transition("JobFail", r.ID, lifecycle.EventRetried, lifecycle.StatusQueued, func() (*driver.Job, error) { return h.d.JobFail(h.ctx, fp) })
	p := h.claimParams(3 * time.Second)
	p.RequestID = "used-1"
	h.refusedReused(r.ID, "JobClaim with a request_id in the candidate's log", func() error {
		_, err := h.d.JobClaim(h.ctx, p)
		return err
	})
	p.RequestID = "claim-2"
	h.mustClaimOne(p)
}

// retriedAndReclaimed runs a job to a retry reported with requestID at t0+2s
// and claims it again (attempt 2) at t0+4s; it returns the first attempt's
// running job, the retry's parameters and the second claim.
func (h *harness) retriedAndReclaimed(requestID string) (*driver.Job, driver.FailParams, *driver.Job) {
	h.t.Helper()
	r := h.runningJob(nil)
	p := failParams(h.at(2*time.Second), "first try", h.tm(3*time.Second), false)
	p.FenceParams = fence(r, h.at(2*time.Second))
	p.RequestID = requestID
	h.transition("JobFail", r.ID, lifecycle.EventRetried, lifecycle.StatusQueued, func() (*driver.Job, error) { return h.d.JobFail(h.ctx, p) })
	c := h.mustClaimOne(driver.ClaimParams{ID: r.ID, Limit: 1, Owner: owner, LeaseDuration: leaseDuration, Now: h.at(4 * time.Second)})
	return r, p, c
}

// testReplayOtherAttempt: a repeat is a call of the attempt that logged its
// request_id. The lease holder of a later attempt that reuses it is refused
// with an error naming request_id, and nothing changes (before, it was
// answered as a repeat and its report was dropped); the earlier attempt's
// holder still gets its repeat answered.
func testReplayOtherAttempt(h *harness) {
	r, p, c := h.retriedAndReclaimed("report-1")
	s := h.mustStart(c, 5*time.Second)
	if s.Attempt != r.Attempt+1 {
		h.t.Fatalf("second claim: attempt %d, want %d", s.Attempt, r.Attempt+1)
	}
	cp := driver.CompleteParams{FenceParams: fence(s, h.at(6*time.Second)), Result: json.RawMessage(`2`)}
	cp.RequestID = "report-1"
	what := "JobComplete of attempt 2 with attempt 1's request_id"
	h.refusedReused(s.ID, what, func() error {
		_, err := h.d.JobComplete(h.ctx, cp)
		return err
	})
	// In a batch it fails alone: another job's completion goes through.
	o := h.runningJob(nil)
	op := driver.CompleteParams{FenceParams: fence(o, h.at(6*time.Second)), Result: json.RawMessage(`3`)}
	op.RequestID = "report-o"
	outs := h.d.JobCompleteMany(h.ctx, []driver.CompleteParams{cp, op})
	if len(outs) != 2 || !errors.Is(outs[0].Err, driver.ErrInvalidArgument) || !errors.Is(outs[0].Err, driver.ErrRequestReused) {
		h.t.Errorf("JobCompleteMany of attempt 2 with attempt 1's request_id = %+v, want ErrRequestReused", outs)
	}
	if len(outs) == 2 && (outs[1].Err != nil || outs[1].Job == nil || outs[1].Job.Status != lifecycle.StatusSucceeded) {
		h.t.Errorf("JobCompleteMany: the other job's completion = %+v, want it succeeded", outs[1])
	}
	hp := driver.HeartbeatParams{FenceParams: fence(s, h.at(6*time.Second))}
	hp.RequestID, hp.LeaseDuration = "report-1", leaseDuration
	h.refusedReused(s.ID, "JobHeartbeat of attempt 2 with attempt 1's request_id", func() error {
		_, err := h.d.JobHeartbeat(h.ctx, hp)
		return err
	})
	// A batch of starts with such a request_id: it fails alone too. (A claimed
	// job of attempt 2 of another job, whose log holds "report-1" from attempt 1.)
	_, _, c2 := h.retriedAndReclaimed("report-1")
	other := h.claimedJob(nil)
	sp, op2 := fence(c2, h.at(5*time.Second)), fence(other, h.at(5*time.Second))
	sp.RequestID, op2.RequestID = "report-1", "start-other"
	before := h.snap(c2.ID)
	starts := h.d.JobStartMany(h.ctx, []driver.FenceParams{sp, op2})
	if len(starts) != 2 || !errors.Is(starts[0].Err, driver.ErrInvalidArgument) || !errors.Is(starts[0].Err, driver.ErrRequestReused) {
		h.t.Errorf("JobStartMany of attempt 2 with attempt 1's request_id = %+v, want ErrRequestReused", starts)
	}
	if len(starts) == 2 && (starts[1].Err != nil || starts[1].Job == nil || starts[1].Job.Status != lifecycle.StatusRunning) {
		h.t.Errorf("JobStartMany: the other job's start = %+v, want it running", starts[1])
	}
	h.wantUnchanged(before, "JobStartMany with a reused request_id")
	// The first attempt's holder repeating its report gets its answer, without
	// attempt 2's lease token.
	h.wantReplayAt(r.ID, p.Attempt, "JobFail of attempt 1, repeated during attempt 2", func() (*driver.Job, error) { return h.d.JobFail(h.ctx, p) })
	cp.RequestID = "report-2"
	h.transition("JobComplete", s.ID, lifecycle.EventSucceeded, lifecycle.StatusSucceeded, func() (*driver.Job, error) { return h.d.JobComplete(h.ctx, cp) })
}

// idempotencyKeyTests: enqueueing an existing idempotency key returns the earlier job.
var idempotencyKeyTests = []suiteTest{
	{"ConcurrentSameKey", testKeyConcurrent},
	{"BatchWithRepeatedKey", testKeyBatch},
	{"ConcurrentBatchesInOtherOrders", testKeyBatchesCrossed},
}

// testKeyBatchesCrossed: two batches that name the same keys in opposite
// orders, enqueued at once, both succeed, and each key has one job. On
// PostgreSQL each waited, through ON CONFLICT, for a key the other had
// inserted first, and one failed with a deadlock (helper-20).
func testKeyBatchesCrossed(h *harness) {
	const keys, rounds = 50, 10
	for r := range rounds {
		fwd := make([]driver.InsertParams, keys)
		for i := range fwd {
			fwd[i] = h.params(func(p *driver.InsertParams) { p.IdempotencyKey = fmt.Sprintf("r%d-%d", r, i) })
		}
		rev := slices.Clone(fwd)
		slices.Reverse(rev)
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 2)
		for g, batch := range [][]driver.InsertParams{fwd, rev} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[g] = h.d.JobInsertMany(h.ctx, batch)
			}()
		}
		close(start)
		wg.Wait()
		for g, err := range errs {
			if err != nil {
				h.t.Fatalf("round %d: batch %d of two naming the same keys in opposite orders: %v", r, g, err)
			}
		}
	}
	if all := h.listAll(driver.ListParams{Limit: 1000}); len(all) != keys*rounds {
		h.t.Errorf("database holds %d jobs, want %d: one a key", len(all), keys*rounds)
	}
}

func testKeyConcurrent(h *harness) {
	const n = 50
	p := h.params(func(p *driver.InsertParams) { p.IdempotencyKey = "order-42" })
	if err := driver.ValidateInsert(&p, driver.Limits{}); err != nil {
		h.t.Fatal(err)
	}
	results := make([]driver.InsertResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := h.d.JobInsertMany(h.ctx, []driver.InsertParams{p})
			if err == nil && len(res) != 1 {
				err = fmt.Errorf("%d results, want 1", len(res))
			}
			if err == nil {
				results[i] = res[0]
			}
			errs[i] = err
		}()
	}
	close(start)
	wg.Wait()
	fresh := 0
	var id int64
	for i := range n {
		if errs[i] != nil {
			h.t.Errorf("enqueue %d of the same key: %v", i, errs[i])
			continue
		}
		r := results[i]
		if !r.Existing {
			fresh++
		}
		if id == 0 {
			id = r.Job.ID
		}
		if r.Job.ID != id {
			h.t.Errorf("enqueue %d returned job %d, another returned %d; want one job", i, r.Job.ID, id)
		}
	}
	if fresh != 1 {
		h.t.Errorf("%d of %d enqueues have Existing = false, want exactly 1", fresh, n)
	}
	if all := h.listAll(driver.ListParams{Limit: 100}); len(all) != 1 {
		h.t.Errorf("database holds %d jobs %v, want 1", len(all), jobIDs(all))
	}
	if evs := h.events(id); len(evs) != 1 {
		h.t.Errorf("job %d events %s, want only the enqueue", id, fmtEvents(evs))
	}
}

func testKeyBatch(h *harness) {
	key := func(k string) driver.InsertParams {
		return h.params(func(p *driver.InsertParams) { p.IdempotencyKey = k; p.Args = json.RawMessage(`{"k":"` + k + `"}`) })
	}
	res := h.mustInsert(key("k1"), key("k2"), key("k1"))
	if res[0].Existing || res[1].Existing || !res[2].Existing {
		h.t.Errorf("batch k1 k2 k1: Existing = %v %v %v, want false false true", res[0].Existing, res[1].Existing, res[2].Existing)
	}
	if res[2].Job.ID != res[0].Job.ID || res[1].Job.ID == res[0].Job.ID {
		h.t.Errorf("batch k1 k2 k1: ids %d %d %d, want the first and last equal and the middle different", res[0].Job.ID, res[1].Job.ID, res[2].Job.ID)
	}
	if res[0].Job.IdempotencyKey != "k1" {
		h.t.Errorf("idempotency_key = %q, want k1", res[0].Job.IdempotencyKey)
	}
	// The key still maps to the job once it has moved on; nothing about it changes.
	c := h.mustClaimOne(driver.ClaimParams{Queues: []string{defaultQueue}, ID: res[1].Job.ID, Limit: 1, Owner: owner, LeaseDuration: leaseDuration, Now: h.at(0)})
	before := h.snap(c.ID)
	res2 := h.mustInsert(key("k2"), key("k3"))
	if !res2[0].Existing || res2[0].Job.ID != c.ID || res2[1].Existing {
		h.t.Errorf("batch k2 k3: (%d, %v) (%d, %v); want (%d, true) and a new job", res2[0].Job.ID, res2[0].Existing, res2[1].Job.ID, res2[1].Existing, c.ID)
	}
	if res2[0].Job.Status != lifecycle.StatusClaimed {
		h.t.Errorf("existing job returned as %s, want it as it is now (claimed)", res2[0].Job.Status)
	}
	h.wantUnchanged(before, "enqueue of an existing key")
	if all := h.listAll(driver.ListParams{Limit: 100}); len(all) != 3 {
		h.t.Errorf("database holds %d jobs, want 3 (k1, k2, k3)", len(all))
	}
}
