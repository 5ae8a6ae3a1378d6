package drivertest

import (
	"errors"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// batchTests: batched starts, retry and snooze delays on the database clock, and a
// repeated claim request that must never claim more.
var batchTests = []suiteTest{
	{"StartManyFencesEachJob", testStartMany},
	{"FailRetryDelayFromNow", testRetryDelay},
	{"SnoozeDelayFromNow", testSnoozeDelay},
	{"ClaimReplayNeverClaimsMore", testClaimReplayNeverClaimsMore},
	{"ClaimReplayOnlyCollects", testClaimReplayOnly},
}

func testStartMany(h *harness) {
	a, b, c := h.claimedJob(nil), h.claimedJob(nil), h.claimedJob(nil)
	stale := fence(b, h.at(time.Second))
	stale.LeaseToken = otherToken
	before := h.snap(b.ID)
	params := []driver.FenceParams{fence(a, h.at(time.Second)), stale, fence(c, h.at(time.Second))}
	for i := range params {
		params[i].LeaseDuration = leaseDuration
	}
	outs := h.d.JobStartMany(h.ctx, params)
	if len(outs) != 3 {
		h.t.Fatalf("JobStartMany returned %d outcomes, want 3", len(outs))
	}
	for i, j := range []*driver.Job{a, c} {
		o := outs[i*2]
		if o.Err != nil || o.Job == nil || o.Job.ID != j.ID || o.Job.Status != lifecycle.StatusRunning {
			h.t.Fatalf("JobStartMany outcome for job %d = %+v, want it running", j.ID, o)
		}
		h.checkJob(o.Job, "JobStartMany")
		h.wantLastEvent(o.Job, lifecycle.EventStarted, lifecycle.StatusClaimed, -1)
		if o.Job.Executions != 1 || o.Job.StartedAt == nil || !o.Job.StartedAt.Equal(h.tm(time.Second)) {
			h.t.Errorf("JobStartMany job %d: executions %d started_at %s, want 1 and %s",
				j.ID, o.Job.Executions, fmtTimePtr(o.Job.StartedAt), fmtTime(h.tm(time.Second)))
		}
	}
	if !errors.Is(outs[1].Err, driver.ErrLeaseLost) {
		h.t.Errorf("JobStartMany with a stale token: err = %v, want ErrLeaseLost", outs[1].Err)
	}
	h.wantUnchanged(before, "JobStartMany with a stale token")
}

func testRetryDelay(h *harness) {
	j := h.runningJob(nil)
	p := driver.FailParams{FenceParams: fence(j, h.at(2*time.Second)), Error: "boom", RetryDelay: 5 * time.Second}
	r := h.transition("JobFail", j.ID, lifecycle.EventRetried, lifecycle.StatusQueued, func() (*driver.Job, error) {
		return h.d.JobFail(h.ctx, p)
	})
	if want := h.tm(7 * time.Second); !r.RunAt.Equal(want) {
		h.t.Errorf("JobFail with RetryDelay 5s at t0+2s: run_at = %s, want %s", fmtTime(r.RunAt), fmtTime(want))
	}
	h.mustClaimNone(h.claimParams(7*time.Second - time.Millisecond))
	h.mustClaim(7 * time.Second)
}

func testSnoozeDelay(h *harness) {
	j := h.runningJob(nil)
	p := driver.SnoozeParams{FenceParams: fence(j, h.at(2*time.Second)), Delay: time.Minute}
	r := h.transition("JobSnooze", j.ID, lifecycle.EventSnoozed, lifecycle.StatusQueued, func() (*driver.Job, error) {
		return h.d.JobSnooze(h.ctx, p)
	})
	if want := h.tm(62 * time.Second); !r.RunAt.Equal(want) || r.Executions != 0 {
		h.t.Errorf("JobSnooze with Delay 1m at t0+2s: run_at = %s executions %d, want %s and 0", fmtTime(r.RunAt), r.Executions, fmtTime(want))
	}
}

func testClaimReplayNeverClaimsMore(h *harness) {
	first := h.mustEnqueue(nil)
	p := h.claimParams(0)
	p.RequestID = "claim-once"
	c := h.mustClaimOne(p)
	if c.ID != first.ID {
		h.t.Fatalf("claimed job %d, want %d", c.ID, first.ID)
	}
	h.mustComplete(h.mustStart(c, time.Second), 2*time.Second, nil)
	other := h.mustEnqueue(nil)
	// The first claim's job is no longer held, so a repeat answers with nothing; it
	// must not take the new job under the old request.
	p.Now = h.at(3 * time.Second)
	h.mustClaimNone(p)
	if j := h.get(other.ID); j.Status != lifecycle.StatusQueued {
		h.t.Errorf("job %d is %s after a repeated claim request, want queued", other.ID, j.Status)
	}
}

// testClaimReplayOnly: a ReplayOnly claim answers what a claim of its
// request_id took and its owner holds, and with no such claim takes nothing
// while jobs are ready: a stopping worker collects its claim with it, to give
// it back, without claiming more. Without a request_id it is refused.
func testClaimReplayOnly(h *harness) {
	ready := h.mustEnqueue(nil)
	p := h.claimParams(0)
	p.RequestID, p.ReplayOnly = "never-sent", true
	if jobs, err := h.d.JobClaim(h.ctx, p); err != nil || len(jobs) != 0 {
		h.t.Errorf("ReplayOnly claim of a request_id never claimed = %d jobs, %v; want none", len(jobs), err)
	}
	if j := h.get(ready.ID); j.Status != lifecycle.StatusQueued || j.Attempt != 0 {
		h.t.Errorf("job %d after a ReplayOnly claim: %s, attempt %d; want queued, attempt 0", ready.ID, j.Status, j.Attempt)
	}
	// The request_id is closed: a sending of it that runs later (one still
	// waiting in a long poll behind a proxy) claims nothing, where it leased
	// the job to a worker that had gone (helper-49).
	p.ReplayOnly = false
	if jobs, err := h.d.JobClaim(h.ctx, p); err != nil || len(jobs) != 0 {
		h.t.Errorf("claim of a request_id its worker collected = %d jobs, %v; want none", len(jobs), err)
	}
	p.Owner = "worker-2"
	h.rejected(ready.ID, driver.ErrInvalidArgument, "claim by another worker of a request_id closed by its worker", func() error {
		_, err := h.d.JobClaim(h.ctx, p)
		return err
	})
	p.Owner = owner
	p.RequestID, p.ReplayOnly = "sent", false
	c := h.mustClaimOne(p)
	p.ReplayOnly, p.Now = true, h.at(time.Second)
	jobs, err := h.d.JobClaim(h.ctx, p)
	if err != nil || len(jobs) != 1 || jobs[0].ID != c.ID || !jobs[0].Replayed || jobs[0].LeaseToken != c.LeaseToken {
		h.t.Errorf("ReplayOnly claim of its claim's request_id = %+v, %v; want job %d replayed under its lease", jobs, err, c.ID)
	}
	p.RequestID = ""
	what := "ReplayOnly claim without a request_id"
	h.rejected(c.ID, driver.ErrInvalidArgument, what, func() error {
		_, err := h.d.JobClaim(h.ctx, p)
		return h.namingField(what, "request_id", err)
	})
}

func init() {
	batchTests = append(batchTests, suiteTest{"ClaimAndStart", testClaimAndStart})
}

// testClaimAndStart: with Start, a claim leaves each job running, with the two
// transitions logged as two events, executions counted once and the lease set.
func testClaimAndStart(h *harness) {
	a, b := h.mustEnqueue(nil), h.mustEnqueue(nil)
	p := h.claimParams(0)
	p.Limit, p.Start = 5, true
	jobs, err := h.d.JobClaim(h.ctx, p)
	if err != nil || len(jobs) != 2 {
		h.t.Fatalf("JobClaim with Start: %v, %d jobs; want 2", err, len(jobs))
	}
	for _, j := range jobs {
		h.checkJob(j, "JobClaim with Start")
		if j.Status != lifecycle.StatusRunning || j.Attempt != 1 || j.Executions != 1 || j.StartedAt == nil ||
			j.LeaseToken == "" || j.LeaseExpiresAt == nil || !j.LeaseExpiresAt.Equal(p.Now.Add(p.LeaseDuration)) {
			h.t.Errorf("JobClaim with Start: job %d is %s attempt %d executions %d started %s lease %s; want running, 1, 1, with a lease",
				j.ID, j.Status, j.Attempt, j.Executions, fmtTimePtr(j.StartedAt), fmtTimePtr(j.LeaseExpiresAt))
		}
		evs := h.events(j.ID)
		if len(evs) != 3 || evs[1].Type != lifecycle.EventClaimed || evs[2].Type != lifecycle.EventStarted || evs[2].Seq != j.Rev {
			h.t.Errorf("JobClaim with Start: job %d events %s; want enqueued, claimed, started (seq = rev %d)", j.ID, fmtEvents(evs), j.Rev)
		}
		if d := diffJobs(j, h.get(j.ID)); d != "" {
			h.t.Errorf("JobClaim with Start: returned job %d differs from JobGet: %s", j.ID, d)
		}
		h.mustComplete(j, time.Second, nil)
	}
	if jobs[0].ID != a.ID || jobs[1].ID != b.ID {
		h.t.Errorf("claimed %d, %d; want %d, %d in order", jobs[0].ID, jobs[1].ID, a.ID, b.ID)
	}
}
