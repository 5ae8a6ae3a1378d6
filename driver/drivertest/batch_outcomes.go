package drivertest

import (
	"errors"
	"fmt"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

func init() {
	batchTests = append(batchTests,
		suiteTest{"StartManyOutcomesAreTheTruth", testStartManyOutcomesAreTheTruth})
}

// testStartManyOutcomesAreTheTruth: every outcome of a batch of starts says
// what the database holds. A request_id no database keeps (a NUL) is refused
// alone, before the batch runs, and the other start goes through. One that
// PostgreSQL refuses only once the batch's statement for it runs (bytes that
// are not UTF-8) loses the batch's transaction, and with it the start made
// before it: that outcome must then carry the error too, where it answered
// the job running while the database still had it claimed.
func testStartManyOutcomesAreTheTruth(h *harness) {
	for _, bad := range []string{"start-\x00", "start-\xff"} {
		good, other := h.claimedJob(nil), h.claimedJob(nil)
		params := []driver.FenceParams{fence(good, h.at(time.Second)), fence(other, h.at(time.Second))}
		params[0].RequestID, params[1].RequestID = "start-good", bad
		before := []snapshot{h.snap(good.ID), h.snap(other.ID)}
		outs := h.d.JobStartMany(h.ctx, params)
		if len(outs) != 2 {
			h.t.Fatalf("JobStartMany returned %d outcomes, want 2", len(outs))
		}
		for i, o := range outs {
			h.wantStartOutcome(o, before[i], fmt.Sprintf("JobStartMany with request_ids %q, %q: outcome %d", params[0].RequestID, bad, i))
		}
		if bad == "start-\x00" {
			what := "JobStartMany: the start with a NUL in its request_id"
			if !errors.Is(outs[1].Err, driver.ErrInvalidArgument) {
				h.t.Errorf("%s = %+v, want ErrInvalidArgument, refused alone", what, outs[1])
			}
			h.namingField(what, "request_id", outs[1].Err)
			if outs[0].Err != nil {
				h.t.Errorf("JobStartMany: the other start, beside a request_id with a NUL = %v, want it running", outs[0].Err)
			}
		}
	}
}

// wantStartOutcome asserts that o, a start's outcome, is the truth: without
// an error the job is running as o says, with one it is as it was (before).
func (h *harness) wantStartOutcome(o driver.JobOutcome, before snapshot, what string) {
	h.t.Helper()
	id := before.job.ID
	if o.Err != nil {
		if o.Job != nil {
			h.t.Errorf("%s: an error (%v) and a job", what, o.Err)
		}
		h.wantUnchanged(before, what+" (an error)")
		return
	}
	if o.Job == nil || o.Job.ID != id || o.Job.Status != lifecycle.StatusRunning {
		h.t.Errorf("%s = %+v without an error, want job %d running", what, o, id)
		return
	}
	h.checkJob(o.Job, what)
	cur := h.get(id)
	if cur.Status != lifecycle.StatusRunning {
		h.t.Errorf("%s answered job %d running, but it is %s (rev %d, was %d)", what, id, cur.Status, cur.Rev, before.job.Rev)
		return
	}
	if d := diffJobs(o.Job, cur); d != "" {
		h.t.Errorf("%s: the job answered differs from JobGet: %s", what, d)
	}
	h.wantLastEvent(cur, lifecycle.EventStarted, lifecycle.StatusClaimed, len(before.events)+1)
}
