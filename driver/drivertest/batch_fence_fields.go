package drivertest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// batchFenceTests: a batched start or completion is fenced on each part of the
// fence, the attempt as well as the lease token, as the single calls are
// (testWrongToken), with and without a request_id.
var batchFenceTests = []suiteTest{
	{"StartManyChecksEachFenceField", testStartManyFenceFields},
	{"CompleteManyChecksEachFenceField", testCompleteManyFenceFields},
}

// badFences are the fences of j a batch must refuse: its token with another
// attempt (the attempt before and after j's), and its attempt with another
// token.
func badFences(j *driver.Job, now *time.Time) []namedFence {
	var out []namedFence
	for _, d := range []int{-1, 1} {
		f := fence(j, now)
		f.Attempt += d
		out = append(out, namedFence{fmt.Sprintf("the job's token with attempt %d (the job's is %d)", f.Attempt, j.Attempt), f})
	}
	f := fence(j, now)
	f.LeaseToken = otherToken
	return append(out, namedFence{"the job's attempt with another token", f})
}

type namedFence struct {
	what string
	f    driver.FenceParams
}

// testStartManyFenceFields: in a JobStartMany beside a good start, a start
// whose fence differs from the job's in one field is refused (ErrLeaseLost)
// and changes nothing; the good one runs.
func testStartManyFenceFields(h *harness) {
	for _, reqID := range []string{"", "start-req"} {
		victim := h.claimedJob(nil)
		for _, nf := range badFences(victim, h.at(time.Second)) {
			what, bad := nf.what, nf.f
			good := h.claimedJob(nil)
			bad.RequestID = reqID
			ok := fence(good, h.at(time.Second))
			ok.RequestID = reqID
			name := fmt.Sprintf("JobStartMany with %s (request_id %q)", what, reqID)
			h.rejected(victim.ID, driver.ErrLeaseLost, name, func() error {
				outs := h.d.JobStartMany(h.ctx, []driver.FenceParams{bad, ok})
				if len(outs) != 2 {
					h.t.Fatalf("%s: %d outcomes, want 2", name, len(outs))
				}
				if outs[1].Err != nil || outs[1].Job == nil || outs[1].Job.Status != lifecycle.StatusRunning {
					h.t.Errorf("%s: the good start of the batch = %+v; want it running", name, outs[1])
				}
				if outs[0].Err == nil && outs[0].Job != nil {
					h.t.Errorf("%s: started job %d (%s attempt %d)", name, outs[0].Job.ID, outs[0].Job.Status, outs[0].Job.Attempt)
				}
				return outs[0].Err
			})
		}
	}
}

// testCompleteManyFenceFields: as testStartManyFenceFields, for
// JobCompleteMany and JobCompleteManyErrs of running jobs.
func testCompleteManyFenceFields(h *harness) {
	for _, call := range []string{"JobCompleteMany", "JobCompleteManyErrs"} {
		for _, reqID := range []string{"", "complete-req"} {
			victim := h.runningJob(nil)
			for _, nf := range badFences(victim, h.at(2*time.Second)) {
				what, bad := nf.what, nf.f
				good := h.runningJob(nil)
				ok := fence(good, h.at(2*time.Second))
				bad.RequestID, ok.RequestID = reqID, reqID
				ps := []driver.CompleteParams{
					{FenceParams: bad, Result: json.RawMessage(`"stale"`)},
					{FenceParams: ok, Result: json.RawMessage(`"good"`)},
				}
				name := fmt.Sprintf("%s with %s (request_id %q)", call, what, reqID)
				h.rejected(victim.ID, driver.ErrLeaseLost, name, func() error {
					var errs []error
					if call == "JobCompleteManyErrs" {
						errs = h.d.JobCompleteManyErrs(h.ctx, ps)
					} else {
						for _, o := range h.d.JobCompleteMany(h.ctx, ps) {
							errs = append(errs, o.Err)
						}
					}
					if len(errs) != 2 {
						h.t.Fatalf("%s: %d outcomes, want 2", name, len(errs))
					}
					if errs[1] != nil {
						h.t.Errorf("%s: the good completion of the batch: %v", name, errs[1])
					}
					if g := h.get(good.ID); g.Status != lifecycle.StatusSucceeded || !jsonEqual(g.Result, json.RawMessage(`"good"`)) {
						h.t.Errorf("%s: the good job is %s with result %s, want succeeded with \"good\"", name, g.Status, g.Result)
					}
					return errs[0]
				})
			}
		}
	}
}
