package drivertest

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/drover-dev/drover/driver"
)

func init() {
	requestIDTests = append(requestIDTests,
		suiteTest{"EveryCallWithTheRequestIDOfAnother", testRequestIDOfEveryOtherCall})
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
				h.rejected(j.ID, driver.ErrInvalidArgument, what, func() error {
					_, err := later.call(h, f)
					return h.namingField(what, "request_id", err)
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
