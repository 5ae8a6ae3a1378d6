package drivertest

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// forbiddenTests try edges the lifecycle does not allow. Lease-holder calls that do
// not match the job's status are ErrLeaseLost, operator calls ErrInvalidTransition,
// unknown ids ErrNotFound; in every case nothing changes.
var forbiddenTests = []suiteTest{
	{"LeaseHolderCalls", testForbiddenLeaseHolder},
	{"CancelTerminal", testCancelTerminal},
	{"UnknownID", testUnknownID},
}

func (h *harness) start(j *driver.Job, now time.Duration) error {
	_, err := h.d.JobStart(h.ctx, fence(j, h.at(now)))
	return err
}

func (h *harness) complete(j *driver.Job, now time.Duration) error {
	_, err := h.d.JobComplete(h.ctx, driver.CompleteParams{FenceParams: fence(j, h.at(now)), Result: json.RawMessage(`{"late":true}`)})
	return err
}

func (h *harness) fail(j *driver.Job, now time.Duration) error {
	_, err := h.d.JobFail(h.ctx, failParams2(j, h.at(now)))
	return err
}

func (h *harness) snooze(j *driver.Job, now time.Duration) error {
	_, err := h.d.JobSnooze(h.ctx, driver.SnoozeParams{FenceParams: fence(j, h.at(now)), RunAt: h.tm(now + time.Hour)})
	return err
}

func (h *harness) unclaim(j *driver.Job, now time.Duration) error {
	_, err := h.d.JobUnclaim(h.ctx, fence(j, h.at(now)))
	return err
}

func (h *harness) heartbeat(j *driver.Job, now time.Duration) error {
	p := driver.HeartbeatParams{FenceParams: fence(j, h.at(now))}
	p.LeaseDuration = leaseDuration
	res, err := h.d.JobHeartbeat(h.ctx, p)
	if err == nil && res.CancelRequested {
		h.t.Errorf("JobHeartbeat of job %d: CancelRequested = true for a job that was not canceled", j.ID)
	}
	return err
}

// fenceCalls are the lease-holder calls, for tables.
func (h *harness) fenceCalls() map[string]func(j *driver.Job, now time.Duration) error {
	return map[string]func(j *driver.Job, now time.Duration) error{
		"JobStart": h.start, "JobComplete": h.complete, "JobFail": h.fail, "JobSnooze": h.snooze,
		"JobUnclaim": h.unclaim, "JobHeartbeat": h.heartbeat,
	}
}

func testForbiddenLeaseHolder(h *harness) {
	// Each case builds a job in some status and the fence the caller holds, and names
	// the calls that must be refused from there.
	cases := []struct {
		name  string
		setup func() *driver.Job
		calls []string
	}{
		{"queued", func() *driver.Job { return h.mustEnqueue(nil) },
			[]string{"JobStart", "JobComplete", "JobFail", "JobSnooze", "JobUnclaim", "JobHeartbeat"}},
		{"queued with a made-up token", func() *driver.Job {
			j := h.mustEnqueue(nil)
			j.Attempt, j.LeaseToken = 1, otherToken
			return j
		}, []string{"JobStart", "JobComplete", "JobHeartbeat"}},
		{"claimed", func() *driver.Job { return h.claimedJob(nil) },
			[]string{"JobComplete", "JobFail", "JobSnooze"}},
		{"running", func() *driver.Job { return h.runningJob(nil) },
			[]string{"JobStart", "JobUnclaim"}},
		{"succeeded", func() *driver.Job {
			r := h.runningJob(nil)
			h.mustComplete(r, 2*time.Second, json.RawMessage(`1`))
			return r
		}, []string{"JobStart", "JobComplete", "JobFail", "JobSnooze", "JobUnclaim", "JobHeartbeat"}},
		{"failed", func() *driver.Job {
			r := h.runningJob(func(p *driver.InsertParams) { p.MaxAttempts = 1 })
			h.mustFail(r, failParams(h.at(2*time.Second), "boom", h.tm(time.Hour), false), lifecycle.StatusFailed)
			return r
		}, []string{"JobStart", "JobComplete", "JobFail", "JobSnooze", "JobUnclaim", "JobHeartbeat"}},
		{"retried (queued again)", func() *driver.Job {
			r := h.runningJob(nil)
			h.mustFail(r, failParams(h.at(2*time.Second), "boom", h.tm(time.Hour), false), lifecycle.StatusQueued)
			return r
		}, []string{"JobStart", "JobComplete", "JobFail", "JobSnooze", "JobUnclaim", "JobHeartbeat"}},
		{"snoozed (queued again)", func() *driver.Job {
			r := h.runningJob(nil)
			h.mustSnooze(r, 2*time.Second, h.tm(time.Hour))
			return r
		}, []string{"JobStart", "JobComplete", "JobFail", "JobSnooze", "JobUnclaim", "JobHeartbeat"}},
		{"unclaimed (queued again)", func() *driver.Job {
			c := h.claimedJob(nil)
			h.mustUnclaim(c, time.Second)
			return c
		}, []string{"JobStart", "JobComplete", "JobFail", "JobSnooze", "JobUnclaim", "JobHeartbeat"}},
		{"canceled", func() *driver.Job {
			r := h.runningJob(nil)
			h.mustCancel(r.ID, 2*time.Second)
			return r
		}, []string{"JobStart", "JobComplete", "JobFail", "JobSnooze", "JobUnclaim"}},
	}
	calls := h.fenceCalls()
	for _, tc := range cases {
		j := tc.setup()
		for _, name := range tc.calls {
			h.rejected(j.ID, driver.ErrLeaseLost, name+" of a "+tc.name+" job", func() error {
				return calls[name](j, 5*time.Second)
			})
		}
	}
	// Allowed once, refused the second time (no request_id: not a replay).
	r := h.runningJob(nil)
	h.rejected(r.ID, driver.ErrLeaseLost, "JobStart twice", func() error { return h.start(r, 2*time.Second) })
	s := h.mustComplete(r, 3*time.Second, json.RawMessage(`1`))
	h.rejected(s.ID, driver.ErrLeaseLost, "JobComplete twice", func() error { return h.complete(r, 4*time.Second) })
}

func testCancelTerminal(h *harness) {
	r := h.runningJob(nil)
	h.mustComplete(r, 2*time.Second, json.RawMessage(`1`))
	f := h.runningJob(func(p *driver.InsertParams) { p.MaxAttempts = 1 })
	h.mustFail(f, failParams(h.at(2*time.Second), "boom", h.tm(time.Hour), true), lifecycle.StatusFailed)
	x := h.mustEnqueue(nil)
	h.mustCancel(x.ID, time.Second)
	for _, id := range []int64{r.ID, f.ID, x.ID} {
		h.rejected(id, driver.ErrInvalidTransition, "JobCancel of a terminal job", func() error {
			_, err := h.d.JobCancel(h.ctx, driver.CancelParams{ID: id, Actor: "operator", Now: h.at(5 * time.Second)})
			return err
		})
	}
}

func testUnknownID(h *harness) {
	ghost := &driver.Job{ID: 987654321, Attempt: 1, LeaseToken: otherToken}
	if _, err := h.d.JobGet(h.ctx, ghost.ID); err == nil {
		h.t.Fatalf("JobGet(%d) of an empty database: no error", ghost.ID)
	} else {
		h.wantErr(err, driver.ErrNotFound, "JobGet of an unknown id")
	}
	for name, call := range h.fenceCalls() {
		h.wantErr(call(ghost, time.Second), driver.ErrNotFound, name+" of an unknown id")
	}
	_, err := h.d.JobCancel(h.ctx, driver.CancelParams{ID: ghost.ID, Actor: "operator"})
	h.wantErr(err, driver.ErrNotFound, "JobCancel of an unknown id")
	_, err = h.d.JobDLQRequeue(h.ctx, driver.DLQRequeueParams{ID: ghost.ID, Actor: "operator"})
	h.wantErr(err, driver.ErrNotFound, "JobDLQRequeue of an unknown id")
	evs, err := h.d.JobEvents(h.ctx, ghost.ID)
	if !errors.Is(err, driver.ErrNotFound) {
		h.t.Errorf("JobEvents of an unknown id = %v, %v; want ErrNotFound", evs, err)
	}
}
