package drivertest

import "time"

// claimReplayTests: a repeated claim request answers only the leases that
// request handed out.
var claimReplayTests = []suiteTest{
	{"RepeatAfterTheJobWasReclaimedByTheSameWorker", testClaimReplayAfterReclaim},
}

// testClaimReplayAfterReclaim: a claim of request_id "claim-r" takes a job
// (attempt 1); its lease expires, the reaper requeues it, and the same worker
// claims it again with another request (attempt 2). A late repeat of
// "claim-r" must answer no job: the job its first call took is held under
// another claim now, and answering it as claim-r's would hand the worker
// attempt 2 a second time, to run beside the first.
func testClaimReplayAfterReclaim(h *harness) {
	j := h.mustEnqueue(nil)
	p := h.claimParams(0)
	p.RequestID = "claim-r"
	first := h.mustClaimOne(p) // lease until t0+30s
	if first.ID != j.ID {
		h.t.Fatalf("claim-r took job %d, want %d", first.ID, j.ID)
	}
	h.reapOne(j.ID, 31*time.Second)
	again := h.claimParams(32 * time.Second)
	again.RequestID = "claim-s"
	second := h.mustClaimOne(again)
	if second.ID != j.ID || second.Attempt != first.Attempt+1 {
		h.t.Fatalf("claim-s took job %d attempt %d, want job %d attempt %d", second.ID, second.Attempt, j.ID, first.Attempt+1)
	}
	before := h.snap(j.ID)
	p.Now = h.at(33 * time.Second)
	jobs, err := h.d.JobClaim(h.ctx, p)
	if err != nil {
		h.t.Fatalf("JobClaim repeat of claim-r: %v", err)
	}
	for _, r := range jobs {
		h.t.Errorf("JobClaim repeat of claim-r after the job was claimed again by claim-s answered job %d attempt %d (replayed %v, token of claim-s %v); want no job",
			r.ID, r.Attempt, r.Replayed, r.LeaseToken == second.LeaseToken)
	}
	h.wantUnchanged(before, "JobClaim repeat of claim-r")
	// claim-s's own repeat still answers its lease.
	again.Now = h.at(34 * time.Second)
	rs, err := h.d.JobClaim(h.ctx, again)
	if err != nil || len(rs) != 1 || rs[0].ID != j.ID || !rs[0].Replayed || rs[0].LeaseToken != second.LeaseToken {
		h.t.Errorf("JobClaim repeat of claim-s = %v, %v; want job %d replayed with claim-s's lease", jobIDs(rs), err, j.ID)
	}
}
