package drivertest

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// fencingTests prove that only the current attempt's lease holder can move a job:
// a stale attempt or a wrong lease_token gets ErrLeaseLost and changes nothing.
var fencingTests = []suiteTest{
	{"StaleAttemptAfterReapAndReclaim", testStaleAttempt},
	{"StaleRunningAttemptAfterReap", testStaleRunning},
	{"WrongLeaseToken", testWrongToken},
	{"CompleteManyMixed", testCompleteMany},
	{"CompleteManyErrsMixed", testCompleteManyErrs},
	{"CompleteManyResults", testCompleteManyResults},
	{"CompleteManyNamesAJobTwice", testCompleteManyTwice},
	{"LeaseTokenInAnySpelling", testTokenSpelling},
	{"AttemptOutOfRange", testAttemptOutOfRange},
	{"CanceledJobHeartbeatWithAWrongToken", testCanceledHeartbeatWrongToken},
}

// testAttemptOutOfRange: an attempt no claim can have handed out (negative,
// or past the 32-bit column) is a stale fence like any other: ErrLeaseLost
// and nothing changes, on every driver, and in JobStartMany it is refused
// alone. PostgreSQL answered pgx's encode error ("greater than maximum
// value for int4") instead, and JobStartMany lost the whole batch with it.
func testAttemptOutOfRange(h *harness) {
	c := h.claimedJob(nil)
	r := h.runningJob(nil)
	calls := h.fenceCalls()
	for _, attempt := range []int{-1, math.MaxInt32 + 1, 1 << 40} {
		for _, j := range []*driver.Job{c, r} {
			bad := *j
			bad.Attempt = attempt
			for name, call := range calls {
				h.rejected(j.ID, driver.ErrLeaseLost, fmt.Sprintf("%s of a %s job with attempt %d", name, j.Status, attempt), func() error {
					return call(&bad, 10*time.Second)
				})
			}
		}
	}
	other := h.claimedJob(nil)
	bad := fence(c, h.at(10*time.Second))
	bad.Attempt = math.MaxInt32 + 1
	outs := h.d.JobStartMany(h.ctx, []driver.FenceParams{bad, fence(other, h.at(10*time.Second))})
	h.wantErr(outs[0].Err, driver.ErrLeaseLost, "JobStartMany: the start with attempt past int32")
	if outs[1].Err != nil || outs[1].Job == nil || outs[1].Job.Status != lifecycle.StatusRunning {
		h.t.Errorf("JobStartMany: the other start of the batch = %v, %v; want it running", outs[1].Job, outs[1].Err)
	}
}

// reclaimed returns a job claimed at t0, reaped at t0+31s and claimed again at t0+32s,
// together with the first attempt's (now stale) view of it.
func (h *harness) reclaimed() (stale, current *driver.Job) {
	h.t.Helper()
	stale = h.claimedJob(nil)
	h.reapOne(stale.ID, 31*time.Second)
	current = h.mustClaimOne(driver.ClaimParams{Queues: []string{defaultQueue}, ID: stale.ID, Limit: 1, Owner: "worker-2",
		LeaseDuration: leaseDuration, Now: h.at(32 * time.Second)})
	if current.Attempt != stale.Attempt+1 || current.LeaseToken == stale.LeaseToken {
		h.t.Fatalf("reclaim: attempt %d token reused %v, want attempt %d and a new token", current.Attempt, current.LeaseToken == stale.LeaseToken, stale.Attempt+1)
	}
	return stale, current
}

func testStaleAttempt(h *harness) {
	stale, cur := h.reclaimed()
	calls := h.fenceCalls()
	for _, name := range []string{"JobStart", "JobHeartbeat", "JobComplete", "JobFail", "JobSnooze", "JobUnclaim"} {
		h.rejected(cur.ID, driver.ErrLeaseLost, name+" by the stale attempt of a claimed job", func() error {
			return calls[name](stale, 33*time.Second)
		})
	}
	// Half a fence is no fence: the old token with the new attempt, and the reverse.
	mixed := *stale
	mixed.Attempt = cur.Attempt
	h.rejected(cur.ID, driver.ErrLeaseLost, "JobStart with the current attempt and the old token", func() error {
		return h.start(&mixed, 33*time.Second)
	})
	mixed = *cur
	mixed.Attempt = stale.Attempt
	h.rejected(cur.ID, driver.ErrLeaseLost, "JobStart with the old attempt and the current token", func() error {
		return h.start(&mixed, 33*time.Second)
	})
	r := h.mustStart(cur, 34*time.Second)
	for _, name := range []string{"JobStart", "JobHeartbeat", "JobComplete", "JobFail", "JobSnooze", "JobUnclaim"} {
		h.rejected(r.ID, driver.ErrLeaseLost, name+" by the stale attempt of a running job", func() error {
			return calls[name](stale, 35*time.Second)
		})
	}
	h.mustComplete(r, 36*time.Second, json.RawMessage(`{"by":"worker-2"}`))
}

func testStaleRunning(h *harness) {
	r := h.runningJob(nil)
	h.reapOne(r.ID, 31*time.Second)
	calls := h.fenceCalls()
	// The job is queued now: the old holder may do nothing.
	for name, call := range calls {
		h.rejected(r.ID, driver.ErrLeaseLost, name+" by a running attempt that was reaped", func() error {
			return call(r, 32*time.Second)
		})
	}
	c := h.mustClaim(33 * time.Second)
	for name, call := range calls {
		h.rejected(r.ID, driver.ErrLeaseLost, name+" by a reaped attempt after the reclaim", func() error {
			return call(r, 34*time.Second)
		})
	}
	h.mustStart(c, 35*time.Second)
}

func testWrongToken(h *harness) {
	c := h.claimedJob(nil)
	r := h.runningJob(nil)
	calls := h.fenceCalls()
	for _, tok := range []string{otherToken, "not-a-uuid", ""} {
		for _, j := range []*driver.Job{c, r} {
			bad := *j
			bad.LeaseToken = tok
			for name, call := range calls {
				h.rejected(j.ID, driver.ErrLeaseLost, fmt.Sprintf("%s of a %s job with token %q", name, j.Status, tok), func() error {
					return call(&bad, 10*time.Second)
				})
			}
		}
	}
	for _, j := range []*driver.Job{c, r} {
		bad := *j
		bad.Attempt = j.Attempt + 1
		for name, call := range calls {
			h.rejected(j.ID, driver.ErrLeaseLost, fmt.Sprintf("%s of a %s job with a future attempt", name, j.Status), func() error {
				return call(&bad, 10*time.Second)
			})
		}
	}
}

func testCompleteMany(h *harness) {
	completeManyMixed(h, "JobCompleteMany", func(ps []driver.CompleteParams) ([]*driver.Job, []error) {
		outs := h.d.JobCompleteMany(h.ctx, ps)
		jobs, errs := make([]*driver.Job, len(outs)), make([]error, len(outs))
		for i, o := range outs {
			jobs[i], errs[i] = o.Job, o.Err
		}
		return jobs, errs
	})
	// After the batch, whose reap would take this job: a result a database
	// cannot store as given is refused alike on every driver, before anything
	// is written.
	r := h.runningJob(nil)
	for what, res := range map[string]string{"not JSON": `{"n":`, "a NUL escape": `"a\u0000b"`} {
		h.rejected(r.ID, driver.ErrInvalidArgument, "JobComplete with a result that is "+what, func() error {
			_, err := h.d.JobComplete(h.ctx, driver.CompleteParams{FenceParams: fence(r, h.at(time.Second)), Result: json.RawMessage(res)})
			return err
		})
	}
}

// testCompleteManyErrs: the same batch through JobCompleteManyErrs gives the
// same errors and stores the same outcomes; it returns no jobs.
func testCompleteManyErrs(h *harness) {
	completeManyMixed(h, "JobCompleteManyErrs", func(ps []driver.CompleteParams) ([]*driver.Job, []error) {
		return nil, h.d.JobCompleteManyErrs(h.ctx, ps)
	})
}

// testCompleteManyResults: a batch completion stores each job's result as
// JobComplete does, whatever its JSON: every kind of value, text beyond ASCII
// and escapes, numbers past int64 and float64, and no result at all (null).
func testCompleteManyResults(h *harness) {
	results := []string{`{"n":1,"s":"\u00e9 ☃ 😀"}`, `[1,"x",null,true]`, `"text"`, `123456789012345678901234567890`,
		`1.5e300`, `false`, `null`, "", `{"k":"line\u2028sep \" \\ \n"}`, `{}`}
	for _, errsOnly := range []bool{false, true} {
		var ps []driver.CompleteParams
		var jobs []*driver.Job
		for _, res := range results {
			j := h.runningJob(nil)
			jobs = append(jobs, j)
			ps = append(ps, driver.CompleteParams{FenceParams: fence(j, h.at(2*time.Second)), Result: json.RawMessage(res)})
		}
		var errs []error
		if errsOnly {
			errs = h.d.JobCompleteManyErrs(h.ctx, ps)
		} else {
			for _, o := range h.d.JobCompleteMany(h.ctx, ps) {
				errs = append(errs, o.Err)
			}
		}
		for i, res := range results {
			if errs[i] != nil {
				h.t.Errorf("completion %d with result %s (errs only %v): %v", i, res, errsOnly, errs[i])
				continue
			}
			want := json.RawMessage(res)
			if res == "" {
				want = json.RawMessage(`null`)
			}
			if g := h.get(jobs[i].ID); g.Status != lifecycle.StatusSucceeded || !jsonEqual(g.Result, want) {
				h.t.Errorf("job %d after a batch completion with result %s (errs only %v): %s, result %s", g.ID, res, errsOnly, g.Status, g.Result)
			}
		}
	}
}

// completeManyMixed completes a batch of two good completions, a stale attempt,
// a job that is only claimed and a result that is not JSON through call, which returns the jobs (nil if
// it has none) and errors in input order.
func completeManyMixed(h *harness, name string, call func([]driver.CompleteParams) ([]*driver.Job, []error)) {
	stale, cur := h.reclaimed() // cur is claimed by worker-2; reaps at t0+31s
	h.mustStart(cur, 33*time.Second)
	a := h.runningJob(nil) // leases until t0+30s; completed at t0+20s
	b := h.runningJob(nil)
	untouched := h.runningJob(nil)
	notRunning := h.claimedJob(nil)
	snaps := []snapshot{h.snap(untouched.ID), h.snap(cur.ID), h.snap(notRunning.ID)}
	evA, evB := len(h.events(a.ID)), len(h.events(b.ID))

	cp := func(j *driver.Job, res string) driver.CompleteParams {
		return driver.CompleteParams{FenceParams: fence(j, h.at(20*time.Second)), Result: json.RawMessage(res)}
	}
	jobs, errs := call([]driver.CompleteParams{
		cp(a, `{"n":"a"}`), cp(stale, `{"n":"stale"}`), cp(b, `{"n":"b"}`), cp(notRunning, `{"n":"claimed"}`),
		cp(untouched, `{"n":`), // not JSON: refused alone, the batch goes on
	})
	if len(errs) != 5 || (jobs != nil && len(jobs) != 5) {
		h.t.Fatalf("%s returned %d errors and %d jobs, want 5 in input order", name, len(errs), len(jobs))
	}
	for i, ok := range []*driver.Job{a, nil, b, nil, nil} {
		if i == 4 {
			h.wantErr(errs[i], driver.ErrInvalidArgument, fmt.Sprintf("%s outcome %d (a result that is not JSON)", name, i))
			continue
		}
		if ok == nil {
			h.wantErr(errs[i], driver.ErrLeaseLost, fmt.Sprintf("%s outcome %d", name, i))
			continue
		}
		if errs[i] != nil {
			h.t.Errorf("%s outcome %d: %v; want job %d succeeded", name, i, errs[i], ok.ID)
			continue
		}
		if jobs == nil {
			continue
		}
		if jobs[i] == nil {
			h.t.Errorf("%s outcome %d has neither a job nor an error", name, i)
			continue
		}
		if o := jobs[i]; o.ID != ok.ID || o.Status != lifecycle.StatusSucceeded {
			h.t.Errorf("%s outcome %d: job %d %s, want job %d succeeded", name, i, o.ID, o.Status, ok.ID)
		}
		h.checkJob(jobs[i], name)
	}
	for _, s := range snaps {
		h.wantUnchanged(s, name)
	}
	ga, gb := h.get(a.ID), h.get(b.ID)
	if !jsonEqual(ga.Result, json.RawMessage(`{"n":"a"}`)) || !jsonEqual(gb.Result, json.RawMessage(`{"n":"b"}`)) {
		h.t.Errorf("results after %s: a %s, b %s; want {\"n\":\"a\"} and {\"n\":\"b\"}", name, ga.Result, gb.Result)
	}
	h.wantLastEvent(ga, lifecycle.EventSucceeded, lifecycle.StatusRunning, evA+1)
	h.wantLastEvent(gb, lifecycle.EventSucceeded, lifecycle.StatusRunning, evB+1)
	if _, errs := call(nil); len(errs) != 0 {
		h.t.Errorf("%s(nil) = %v, want no outcomes", name, errs)
	}
}

// testCompleteManyTwice: a batch that names one job more than once applies
// each mention in input order, as one call each would be: a wrong token first
// is refused and does not take the right one down with it, and a mention after
// the job succeeded is refused as stale. (PostgreSQL's batch refused every
// mention after the first.)
func testCompleteManyTwice(h *harness) {
	for _, name := range []string{"JobCompleteMany", "JobCompleteManyErrs"} {
		r := h.runningJob(nil)
		wrong := *r
		wrong.LeaseToken = otherToken
		cp := func(j *driver.Job, res string) driver.CompleteParams {
			return driver.CompleteParams{FenceParams: fence(j, h.at(20*time.Second)), Result: json.RawMessage(res)}
		}
		ps := []driver.CompleteParams{cp(&wrong, `"wrong"`), cp(r, `"right"`), cp(r, `"again"`)}
		var errs []error
		if name == "JobCompleteManyErrs" {
			errs = h.d.JobCompleteManyErrs(h.ctx, ps)
		} else {
			for _, o := range h.d.JobCompleteMany(h.ctx, ps) {
				errs = append(errs, o.Err)
				if o.Err == nil && (o.Job == nil || o.Job.ID != r.ID || o.Job.Status != lifecycle.StatusSucceeded) {
					h.t.Errorf("%s: a completed outcome carries %+v, want job %d succeeded", name, o.Job, r.ID)
				}
			}
		}
		if len(errs) != 3 {
			h.t.Fatalf("%s returned %d outcomes, want 3", name, len(errs))
		}
		h.wantErr(errs[0], driver.ErrLeaseLost, name+": the mention with a wrong token")
		if errs[1] != nil {
			h.t.Errorf("%s: the mention with the job's token after a wrong one: %v, want it completed", name, errs[1])
		}
		h.wantErr(errs[2], driver.ErrLeaseLost, name+": a mention after the job succeeded")
		if g := h.get(r.ID); g.Status != lifecycle.StatusSucceeded || !jsonEqual(g.Result, json.RawMessage(`"right"`)) {
			h.t.Errorf("%s: job %s with result %s, want succeeded with \"right\"", name, g.Status, g.Result)
		}
	}
}

// testTokenSpelling: a lease token is a UUID, and every lease-holder call takes
// it in any spelling uuid.Parse reads, on both drivers. SQLite's fence took it
// only as it issued it (lower case), and PostgreSQL's refused the urn: form
// with an error from its uuid cast.
func testTokenSpelling(h *harness) {
	spellings := []struct {
		name  string
		spell func(string) string
	}{
		{"capitals", strings.ToUpper},
		{"braces", func(s string) string { return "{" + s + "}" }},
		{"urn", func(s string) string { return "urn:uuid:" + s }},
	}
	calls := h.fenceCalls()
	for _, sp := range spellings {
		for _, c := range []struct {
			setup func(edit func(p *driver.InsertParams)) *driver.Job
			call  string
		}{
			{h.claimedJob, "JobHeartbeat"}, {h.claimedJob, "JobStart"}, {h.claimedJob, "JobUnclaim"},
			{h.runningJob, "JobComplete"}, {h.runningJob, "JobFail"}, {h.runningJob, "JobSnooze"},
		} {
			j := *c.setup(nil)
			j.LeaseToken = sp.spell(j.LeaseToken)
			if err := calls[c.call](&j, 2*time.Second); err != nil {
				h.t.Errorf("%s of job %d with its token in %s (%s): %v", c.call, j.ID, sp.name, j.LeaseToken, err)
			}
		}
		r := *h.runningJob(nil)
		r.LeaseToken = sp.spell(r.LeaseToken)
		outs := h.d.JobCompleteMany(h.ctx, []driver.CompleteParams{{FenceParams: fence(&r, h.at(3*time.Second)), Result: json.RawMessage(`1`)}})
		if len(outs) != 1 || outs[0].Err != nil || outs[0].Job == nil || outs[0].Job.Status != lifecycle.StatusSucceeded {
			h.t.Errorf("JobCompleteMany of job %d with its token in %s = %+v, want it succeeded", r.ID, sp.name, outs)
		}
	}
}
