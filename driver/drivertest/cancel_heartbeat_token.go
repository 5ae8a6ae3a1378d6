package drivertest

import (
	"fmt"
	"time"

	"github.com/drover-dev/drover/driver"
)

// testCanceledHeartbeatWrongToken: once an operator canceled a job, only the
// holder of the canceled attempt's lease learns so from a heartbeat. A
// heartbeat with the right attempt and a wrong lease token is a stale fence
// like any other: ErrLeaseLost, and nothing changes (issue 3's contract). The
// cancel clears the row's token, and both drivers checked only the attempt,
// so any token was told CancelRequested. A repeat of the holder's heartbeat
// (its request_id) still answers CancelRequested, and the same request_id
// with a wrong token is refused. A job canceled while queued (its last
// attempt reaped) answers its old attempt's holder ErrLeaseLost: that
// attempt had lost its lease before the cancel.
func testCanceledHeartbeatWrongToken(h *harness) {
	beat := func(j *driver.Job, token, requestID string, now time.Duration) (driver.HeartbeatResult, error) {
		p := driver.HeartbeatParams{FenceParams: fence(j, h.at(now))}
		p.LeaseToken, p.RequestID, p.LeaseDuration = token, requestID, leaseDuration
		return h.d.JobHeartbeat(h.ctx, p)
	}
	for _, j := range []*driver.Job{h.claimedJob(nil), h.runningJob(nil)} {
		// The holder heartbeats with a request_id before the cancel, and
		// once after it with another, whose repeat is asked for below.
		if _, err := beat(j, j.LeaseToken, fmt.Sprintf("hb-before-%d", j.ID), 2*time.Second); err != nil {
			h.t.Fatalf("JobHeartbeat of %s job %d: %v", j.Status, j.ID, err)
		}
		h.mustCancel(j.ID, 3*time.Second)
		what := fmt.Sprintf("JobHeartbeat with a wrong token of a job canceled while %s", j.Status)
		for _, req := range []string{"", fmt.Sprintf("hb-wrong-%d", j.ID)} {
			h.rejected(j.ID, driver.ErrLeaseLost, what+" (request_id "+req+")", func() error {
				res, err := beat(j, otherToken, req, 4*time.Second)
				if err == nil {
					h.t.Logf("%s: answered %+v", what, res)
				}
				return err
			})
		}
		res, err := beat(j, j.LeaseToken, fmt.Sprintf("hb-after-%d", j.ID), 5*time.Second)
		if err != nil || !res.CancelRequested {
			h.t.Errorf("JobHeartbeat by the holder of canceled job %d = %+v, %v; want CancelRequested", j.ID, res, err)
		}
		res, err = beat(j, j.LeaseToken, fmt.Sprintf("hb-after-%d", j.ID), 6*time.Second)
		if err != nil || !res.CancelRequested {
			h.t.Errorf("repeat of the holder's JobHeartbeat of canceled job %d = %+v, %v; want CancelRequested", j.ID, res, err)
		}
		res, err = beat(j, j.LeaseToken, fmt.Sprintf("hb-before-%d", j.ID), 6*time.Second)
		if err != nil || !res.CancelRequested {
			h.t.Errorf("late repeat of the holder's JobHeartbeat from before the cancel of job %d = %+v, %v; want CancelRequested", j.ID, res, err)
		}
		h.rejected(j.ID, driver.ErrLeaseLost, what+" repeating the holder's request_id", func() error {
			res, err := beat(j, otherToken, fmt.Sprintf("hb-after-%d", j.ID), 7*time.Second)
			if err == nil {
				h.t.Logf("%s repeating the holder's request_id: answered %+v", what, res)
			}
			return err
		})
	}
	// Reaped, then canceled while queued: the reaped attempt's holder lost
	// its lease to the reaper, not to the cancel.
	r := h.runningJob(nil)
	h.reapOne(r.ID, 31*time.Second)
	h.mustCancel(r.ID, 32*time.Second)
	h.rejected(r.ID, driver.ErrLeaseLost, "JobHeartbeat of the reaped attempt of a job canceled while queued", func() error {
		_, err := beat(r, r.LeaseToken, "", 33*time.Second)
		return err
	})
}
