package drivertest

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

func init() {
	requestIDTests = append(requestIDTests,
		suiteTest{"EveryCallWithTheRequestIDOfAnother", testRequestIDOfEveryOtherCall},
		suiteTest{"BatchWithTheRequestIDOfAnother", testBatchWithTheRequestIDOfAnother})
}

// firstCall is a lease holder's call that logs request_id req on a fresh job;
// it returns the job as its holder knows it (attempt and lease token).
type firstCall struct {
	name string
	do   func(h *harness, req string) *driver.Job
	// repeats names the later calls that repeat it: the same transition of
	// the same attempt, asking for the outcome it stored.
	repeats []string
}

// laterCall is a lease holder's (or an operator's) call that carries a
// request_id a first call logged. It answers the job, if it answers one.
type laterCall struct {
	name string
	call func(h *harness, f driver.FenceParams) (*driver.Job, error)
}

func firstCalls() []firstCall {
	failWith := func(h *harness, j *driver.Job, req string, permanent bool) {
		p := failParams2(j, h.at(2*time.Second))
		p.RequestID, p.Permanent = req, permanent
		if _, err := h.d.JobFail(h.ctx, p); err != nil {
			h.t.Fatalf("JobFail (permanent %v) with request_id %q: %v", permanent, req, err)
		}
	}
	heartbeat := func(h *harness, j *driver.Job, req string) {
		p := driver.HeartbeatParams{FenceParams: fence(j, h.at(2*time.Second))}
		p.RequestID, p.LeaseDuration = req, leaseDuration
		if _, err := h.d.JobHeartbeat(h.ctx, p); err != nil {
			h.t.Fatalf("JobHeartbeat with request_id %q: %v", req, err)
		}
	}
	return []firstCall{
		{"claim", func(h *harness, req string) *driver.Job {
			j := h.mustEnqueue(nil)
			p := h.claimParams(0)
			p.ID, p.RequestID = j.ID, req
			return h.mustClaimOne(p)
		}, nil},
		{"start", func(h *harness, req string) *driver.Job {
			c := h.claimedJob(nil)
			p := fence(c, h.at(time.Second))
			p.RequestID = req
			if _, err := h.d.JobStart(h.ctx, p); err != nil {
				h.t.Fatalf("JobStart with request_id %q: %v", req, err)
			}
			return c
		}, []string{"JobStart", "JobStartMany"}},
		{"heartbeat of a claimed job", func(h *harness, req string) *driver.Job {
			c := h.claimedJob(nil)
			heartbeat(h, c, req)
			return c
		}, []string{"JobHeartbeat"}},
		{"heartbeat of a running job", func(h *harness, req string) *driver.Job {
			r := h.runningJob(nil)
			heartbeat(h, r, req)
			return r
		}, []string{"JobHeartbeat"}},
		{"give-back (unclaim)", func(h *harness, req string) *driver.Job {
			c := h.claimedJob(nil)
			p := fence(c, h.at(time.Second))
			p.RequestID = req
			if _, err := h.d.JobUnclaim(h.ctx, p); err != nil {
				h.t.Fatalf("JobUnclaim with request_id %q: %v", req, err)
			}
			return c
		}, []string{"JobUnclaim"}},
		{"completion", func(h *harness, req string) *driver.Job {
			r := h.runningJob(nil)
			p := driver.CompleteParams{FenceParams: fence(r, h.at(2*time.Second)), Result: json.RawMessage(`1`)}
			p.RequestID = req
			if _, err := h.d.JobComplete(h.ctx, p); err != nil {
				h.t.Fatalf("JobComplete with request_id %q: %v", req, err)
			}
			return r
		}, []string{"JobComplete", "JobCompleteMany", "JobCompleteManyErrs"}},
		// A fail the server turned into a retry: only a fail that leaves the
		// retry to the server repeats it.
		{"fail the server retried", func(h *harness, req string) *driver.Job {
			r := h.runningJob(nil)
			failWith(h, r, req, false)
			return r
		}, []string{"JobFail"}},
		// A permanent fail with attempts left: a fail that leaves the retry
		// to the server would have been retried, so it is another call.
		{"permanent fail", func(h *harness, req string) *driver.Job {
			r := h.runningJob(nil)
			failWith(h, r, req, true)
			return r
		}, []string{"JobFail permanent"}},
		// A fail on the last attempt: the server failed the job, as a
		// permanent fail would have.
		{"fail of the last attempt", func(h *harness, req string) *driver.Job {
			r := h.runningJob(func(p *driver.InsertParams) { p.MaxAttempts = 1 })
			failWith(h, r, req, false)
			return r
		}, []string{"JobFail", "JobFail permanent"}},
		{"snooze", func(h *harness, req string) *driver.Job {
			r := h.runningJob(nil)
			p := driver.SnoozeParams{FenceParams: fence(r, h.at(2*time.Second)), Delay: time.Hour}
			p.RequestID = req
			if _, err := h.d.JobSnooze(h.ctx, p); err != nil {
				h.t.Fatalf("JobSnooze with request_id %q: %v", req, err)
			}
			return r
		}, []string{"JobSnooze"}},
	}
}

func laterCalls() []laterCall {
	fail := func(permanent bool) func(h *harness, f driver.FenceParams) (*driver.Job, error) {
		return func(h *harness, f driver.FenceParams) (*driver.Job, error) {
			p := failParams(f.Now, "again", h.tm(time.Hour), permanent)
			p.FenceParams = f
			return h.d.JobFail(h.ctx, p)
		}
	}
	complete := func(f driver.FenceParams) driver.CompleteParams {
		return driver.CompleteParams{FenceParams: f, Result: json.RawMessage(`2`)}
	}
	return []laterCall{
		{"JobStart", func(h *harness, f driver.FenceParams) (*driver.Job, error) { return h.d.JobStart(h.ctx, f) }},
		{"JobStartMany", func(h *harness, f driver.FenceParams) (*driver.Job, error) {
			o := h.d.JobStartMany(h.ctx, []driver.FenceParams{f})[0]
			return o.Job, o.Err
		}},
		{"JobUnclaim", func(h *harness, f driver.FenceParams) (*driver.Job, error) { return h.d.JobUnclaim(h.ctx, f) }},
		{"JobHeartbeat", func(h *harness, f driver.FenceParams) (*driver.Job, error) {
			f.LeaseDuration = leaseDuration
			_, err := h.d.JobHeartbeat(h.ctx, driver.HeartbeatParams{FenceParams: f})
			return nil, err
		}},
		{"JobComplete", func(h *harness, f driver.FenceParams) (*driver.Job, error) {
			return h.d.JobComplete(h.ctx, complete(f))
		}},
		{"JobCompleteMany", func(h *harness, f driver.FenceParams) (*driver.Job, error) {
			o := h.d.JobCompleteMany(h.ctx, []driver.CompleteParams{complete(f)})[0]
			return o.Job, o.Err
		}},
		{"JobCompleteManyErrs", func(h *harness, f driver.FenceParams) (*driver.Job, error) {
			return nil, h.d.JobCompleteManyErrs(h.ctx, []driver.CompleteParams{complete(f)})[0]
		}},
		{"JobFail", fail(false)},
		{"JobFail permanent", fail(true)},
		{"JobSnooze", func(h *harness, f driver.FenceParams) (*driver.Job, error) {
			return h.d.JobSnooze(h.ctx, driver.SnoozeParams{FenceParams: f, Delay: time.Minute})
		}},
		{"JobCancel", func(h *harness, f driver.FenceParams) (*driver.Job, error) {
			return h.d.JobCancel(h.ctx, driver.CancelParams{ID: f.ID, RequestID: f.RequestID, Actor: "operator", Now: f.Now})
		}},
	}
}

// testRequestIDOfEveryOtherCall: a request_id names one call. For every call
// a lease holder makes with a request_id and every later call of the same
// attempt with it: the later call is answered as a repeat (the job as it is,
// Replayed, nothing changed) only when it is the same transition asking for
// the outcome the first stored; any other is refused with an error naming
// request_id, and changes nothing. A permanent fail whose request_id a fail
// the server had turned into a retry logged was answered as a repeat: its
// caller was told the job failed while it was queued to run again.
func testRequestIDOfEveryOtherCall(h *harness) {
	n := 0
	for _, first := range firstCalls() {
		for _, later := range laterCalls() {
			n++
			req := fmt.Sprintf("req-%d", n) // a claim's request_id is its worker's, whatever the job
			j := first.do(h, req)
			f := fence(j, h.at(10*time.Second))
			f.RequestID = req
			what := fmt.Sprintf("%s with the request_id of a %s", later.name, first.name)
			if !slices.Contains(first.repeats, later.name) {
				h.refusedReused(j.ID, what, func() error {
					_, err := later.call(h, f)
					return err
				})
				continue
			}
			before := h.snap(j.ID)
			got, err := later.call(h, f)
			if err != nil {
				h.t.Errorf("%s (a repeat): %v; want the first answer", what, err)
				continue
			}
			if got != nil && !got.Replayed {
				h.t.Errorf("%s (a repeat): Replayed = false, want true", what)
			}
			h.wantUnchanged(before, what)
		}
	}
}

// testBatchWithTheRequestIDOfAnother: in a batch of completions or of starts,
// a call that reuses the request_id of another call of the same attempt (a
// heartbeat's, whose lease still holds, or a fail's the server retried, or a
// give-back's) is refused alone, as a reuse, and changes nothing; the other
// calls of the batch apply.
func testBatchWithTheRequestIDOfAnother(h *harness) {
	heartbeat := func(j *driver.Job, req string) {
		p := driver.HeartbeatParams{FenceParams: fence(j, h.at(2*time.Second))}
		p.RequestID, p.LeaseDuration = req, leaseDuration
		if _, err := h.d.JobHeartbeat(h.ctx, p); err != nil {
			h.t.Fatalf("JobHeartbeat: %v", err)
		}
	}
	for _, errsOnly := range []bool{false, true} {
		beat, retried, other := h.runningJob(nil), h.runningJob(nil), h.runningJob(nil)
		heartbeat(beat, "hb")
		fp := failParams2(retried, h.at(2*time.Second))
		fp.RequestID = "fail"
		h.transition("JobFail", retried.ID, lifecycle.EventRetried, lifecycle.StatusQueued, func() (*driver.Job, error) { return h.d.JobFail(h.ctx, fp) })
		ps := []driver.CompleteParams{
			{FenceParams: fence(beat, h.at(3*time.Second)), Result: json.RawMessage(`1`)},
			{FenceParams: fence(retried, h.at(3*time.Second)), Result: json.RawMessage(`2`)},
			{FenceParams: fence(other, h.at(3*time.Second)), Result: json.RawMessage(`3`)},
		}
		ps[0].RequestID, ps[1].RequestID, ps[2].RequestID = "hb", "fail", "done"
		before := []snapshot{h.snap(beat.ID), h.snap(retried.ID)}
		var errs []error
		if errsOnly {
			errs = h.d.JobCompleteManyErrs(h.ctx, ps)
		} else {
			outs := h.d.JobCompleteMany(h.ctx, ps)
			errs = driver.OutcomeErrs(outs)
			if len(outs) == 3 && (outs[2].Job == nil || outs[2].Job.Status != lifecycle.StatusSucceeded) {
				h.t.Errorf("JobCompleteMany: the other job's outcome = %+v, want it succeeded", outs[2])
			}
		}
		what := fmt.Sprintf("JobCompleteMany (errs only %v)", errsOnly)
		if len(errs) != 3 {
			h.t.Fatalf("%s: %d outcomes, want 3", what, len(errs))
		}
		for i, name := range []string{"a completion with its heartbeat's request_id", "a completion with the request_id of a fail the server retried"} {
			h.wantErr(errs[i], driver.ErrRequestReused, what+": "+name)
			h.namingField(what, "request_id", errs[i])
			h.wantUnchanged(before[i], what+": "+name)
		}
		if errs[2] != nil {
			h.t.Errorf("%s: the other job's completion failed with the refused ones: %v", what, errs[2])
		}
		if j := h.get(other.ID); j.Status != lifecycle.StatusSucceeded {
			h.t.Errorf("%s: the other job is %s, want succeeded", what, j.Status)
		}
	}
	beat, given, other := h.claimedJob(nil), h.claimedJob(nil), h.claimedJob(nil)
	heartbeat(beat, "hb-c")
	up := fence(given, h.at(time.Second))
	up.RequestID = "back"
	h.transition("JobUnclaim", given.ID, lifecycle.EventUnclaimed, lifecycle.StatusQueued, func() (*driver.Job, error) { return h.d.JobUnclaim(h.ctx, up) })
	ps := []driver.FenceParams{fence(beat, h.at(3*time.Second)), fence(given, h.at(3*time.Second)), fence(other, h.at(3*time.Second))}
	ps[0].RequestID, ps[1].RequestID, ps[2].RequestID = "hb-c", "back", "start"
	before := []snapshot{h.snap(beat.ID), h.snap(given.ID)}
	outs := h.d.JobStartMany(h.ctx, ps)
	if len(outs) != 3 {
		h.t.Fatalf("JobStartMany: %d outcomes, want 3", len(outs))
	}
	for i, name := range []string{"a start with its heartbeat's request_id", "a start with its give-back's request_id"} {
		h.wantErr(outs[i].Err, driver.ErrRequestReused, "JobStartMany: "+name)
		h.namingField("JobStartMany", "request_id", outs[i].Err)
		h.wantUnchanged(before[i], "JobStartMany: "+name)
	}
	if outs[2].Err != nil || outs[2].Job == nil || outs[2].Job.Status != lifecycle.StatusRunning {
		h.t.Errorf("JobStartMany: the other job's start = %+v, want it running", outs[2])
	}
}
