package drivertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

const (
	leaseDuration = 30 * time.Second
	owner         = "worker-1"
	defaultQueue  = "default"
	// otherToken is a well-formed lease token no driver will ever hand out.
	otherToken = "00000000-0000-4000-8000-000000000000"
)

// harness wraps one driver for one test. Its clock t0 is the wall clock at the start
// of the test truncated to the millisecond; steps pass t0+offset as Now.
type harness struct {
	t   *testing.T
	d   driver.Driver
	ctx context.Context
	t0  time.Time
}

func newHarness(t *testing.T, open func(t *testing.T) driver.Driver) *harness {
	t.Helper()
	t.Parallel()
	d := open(t)
	if d == nil {
		t.Fatal("open returned a nil driver")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	h := &harness{t: t, d: d, ctx: ctx, t0: time.Now().UTC().Truncate(time.Millisecond)}
	// Registered after open's Close and cancel, so it runs before both.
	t.Cleanup(h.checkAll)
	return h
}

// at returns a pointer to t0+d, for the Now fields.
func (h *harness) at(d time.Duration) *time.Time {
	x := h.t0.Add(d)
	return &x
}

func (h *harness) tm(d time.Duration) time.Time { return h.t0.Add(d) }

// params returns valid insert params for the default queue, claimable since t0-1s.
func (h *harness) params(edit func(p *driver.InsertParams)) driver.InsertParams {
	p := driver.InsertParams{
		Kind: "test.job", Queue: defaultQueue, Args: json.RawMessage(`{"n":1}`),
		MaxAttempts: 3, RunAt: h.at(-time.Second), Actor: "drivertest",
	}
	if edit != nil {
		edit(&p)
	}
	return p
}

// insert validates ps as a client would and inserts them.
func (h *harness) insert(ps ...driver.InsertParams) ([]driver.InsertResult, error) {
	h.t.Helper()
	for i := range ps {
		if err := driver.ValidateInsert(&ps[i], driver.Limits{}); err != nil {
			h.t.Fatalf("suite bug: insert params %d are invalid: %v", i, err)
		}
	}
	return h.d.JobInsertMany(h.ctx, ps)
}

func (h *harness) mustInsert(ps ...driver.InsertParams) []driver.InsertResult {
	h.t.Helper()
	res, err := h.insert(ps...)
	if err != nil {
		h.t.Fatalf("JobInsertMany(%d jobs): %v", len(ps), err)
	}
	if len(res) != len(ps) {
		h.t.Fatalf("JobInsertMany(%d jobs) returned %d results, want %d", len(ps), len(res), len(ps))
	}
	for i, r := range res {
		if r.Job == nil {
			h.t.Fatalf("JobInsertMany result %d has a nil Job", i)
		}
		h.checkJob(r.Job, fmt.Sprintf("JobInsertMany result %d", i))
		if r.Existing {
			continue
		}
		if d := diffJobs(r.Job, h.get(r.Job.ID)); d != "" {
			h.t.Errorf("JobInsertMany result %d differs from JobGet: %s", i, d)
		}
	}
	return res
}

// mustEnqueue inserts one new job and checks it is queued (or pending in a workflow).
func (h *harness) mustEnqueue(edit func(p *driver.InsertParams)) *driver.Job {
	h.t.Helper()
	p := h.params(edit)
	r := h.mustInsert(p)[0]
	if r.Existing {
		h.t.Fatalf("enqueue: Existing = true for a new job %d", r.Job.ID)
	}
	want := lifecycle.StatusQueued
	if p.WorkflowRunID != nil {
		want = lifecycle.StatusPending
	}
	j := r.Job
	if j.Status != want || j.Attempt != 0 || j.Executions != 0 {
		h.t.Fatalf("enqueue: job %d is %s attempt %d executions %d, want %s attempt 0 executions 0",
			j.ID, j.Status, j.Attempt, j.Executions, want)
	}
	h.wantLastEvent(j, lifecycle.EventEnqueued, "", 1)
	return j
}

func (h *harness) claimParams(now time.Duration) driver.ClaimParams {
	return driver.ClaimParams{
		Queues: []string{defaultQueue}, Limit: 1, Owner: owner,
		LeaseDuration: leaseDuration, Now: h.at(now),
	}
}

// mustClaimN claims with p and checks every returned job is freshly claimed by p.Owner.
func (h *harness) mustClaimN(p driver.ClaimParams) []*driver.Job {
	h.t.Helper()
	jobs, err := h.d.JobClaim(h.ctx, p)
	if err != nil {
		h.t.Fatalf("JobClaim(%+v): %v", p, err)
	}
	if p.Limit > 0 && len(jobs) > p.Limit {
		h.t.Errorf("JobClaim returned %d jobs, more than Limit %d", len(jobs), p.Limit)
	}
	for _, j := range jobs {
		h.checkJob(j, "JobClaim")
		if j.Status != lifecycle.StatusClaimed || j.Owner != p.Owner || j.LeaseToken == "" || j.LeaseExpiresAt == nil {
			h.t.Errorf("JobClaim: job %d is %s owner %q token %q expiry %v, want claimed by %q with a lease",
				j.ID, j.Status, j.Owner, j.LeaseToken, j.LeaseExpiresAt, p.Owner)
		}
		if p.Now != nil && p.LeaseDuration > 0 && j.LeaseExpiresAt != nil && !j.LeaseExpiresAt.Equal(p.Now.Add(p.LeaseDuration)) {
			h.t.Errorf("JobClaim: job %d lease_expires_at = %s, want Now+LeaseDuration = %s",
				j.ID, fmtTime(*j.LeaseExpiresAt), fmtTime(p.Now.Add(p.LeaseDuration)))
		}
		if !j.Replayed {
			h.wantLastEvent(j, lifecycle.EventClaimed, "", -1)
		}
		if d := diffJobs(j, h.get(j.ID)); d != "" {
			h.t.Errorf("JobClaim: returned job %d differs from JobGet: %s", j.ID, d)
		}
	}
	return jobs
}

// mustClaim claims exactly one job from the default queue at t0+now.
func (h *harness) mustClaim(now time.Duration) *driver.Job {
	h.t.Helper()
	return h.mustClaimOne(h.claimParams(now))
}

func (h *harness) mustClaimOne(p driver.ClaimParams) *driver.Job {
	h.t.Helper()
	jobs := h.mustClaimN(p)
	if len(jobs) != 1 {
		h.t.Fatalf("JobClaim(queues %v, id %d, now %v) returned %d jobs %v, want 1", p.Queues, p.ID, fmtTimePtr(p.Now), len(jobs), jobIDs(jobs))
	}
	return jobs[0]
}

func (h *harness) mustClaimNone(p driver.ClaimParams) {
	h.t.Helper()
	jobs := h.mustClaimN(p)
	if len(jobs) != 0 {
		h.t.Fatalf("JobClaim(queues %v, id %d, now %v) returned jobs %v, want none", p.Queues, p.ID, fmtTimePtr(p.Now), jobIDs(jobs))
	}
}

// fence is the lease holder's view of j's current attempt.
func fence(j *driver.Job, now *time.Time) driver.FenceParams {
	return driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, Now: now}
}

// transition runs op on job id and checks the job it returns: no error, invariants,
// the wanted status, exactly one new event of the wanted type whose seq is the new rev.
func (h *harness) transition(what string, id int64, typ lifecycle.EventType, want lifecycle.Status,
	op func() (*driver.Job, error)) *driver.Job {
	h.t.Helper()
	before := h.get(id)
	n := len(h.events(id))
	j, err := op()
	if err != nil {
		h.t.Fatalf("%s of job %d (%s): %v", what, id, before.Status, err)
	}
	if j == nil {
		h.t.Fatalf("%s of job %d returned a nil job", what, id)
	}
	h.checkJob(j, what)
	if j.Replayed {
		h.t.Errorf("%s of job %d: Replayed = true on the first call", what, id)
	}
	if j.Status != want {
		h.t.Fatalf("%s of job %d: status %s → %s, want %s", what, id, before.Status, j.Status, want)
	}
	if j.Rev != before.Rev+1 {
		h.t.Errorf("%s of job %d: rev %d → %d, want +1", what, id, before.Rev, j.Rev)
	}
	if d := diffJobs(j, h.get(id)); d != "" {
		h.t.Errorf("%s of job %d: returned job differs from JobGet: %s", what, id, d)
	}
	h.wantLastEvent(j, typ, before.Status, n+1)
	return j
}

// wantLastEvent checks j's last event: its type, from (unless ""), to = j.Status,
// seq = j.Rev and attempt = j.Attempt; and the event count when n >= 0.
func (h *harness) wantLastEvent(j *driver.Job, typ lifecycle.EventType, from lifecycle.Status, n int) {
	h.t.Helper()
	evs := h.events(j.ID)
	if n >= 0 && len(evs) != n {
		h.t.Errorf("job %d has %d events %s, want %d", j.ID, len(evs), fmtEvents(evs), n)
	}
	if len(evs) == 0 {
		h.t.Errorf("job %d has no events, want a %s event", j.ID, typ)
		return
	}
	e := evs[len(evs)-1]
	if e.Type != typ || (from != "" && e.From != from) || e.To != j.Status || e.Seq != j.Rev || e.Attempt != j.Attempt || e.JobID != j.ID {
		h.t.Errorf("job %d last event = %s, want type %s from %q to %s seq %d (= rev) attempt %d",
			j.ID, fmtEvent(e), typ, from, j.Status, j.Rev, j.Attempt)
	}
}

func (h *harness) mustStart(j *driver.Job, now time.Duration) *driver.Job {
	h.t.Helper()
	r := h.transition("JobStart", j.ID, lifecycle.EventStarted, lifecycle.StatusRunning, func() (*driver.Job, error) {
		return h.d.JobStart(h.ctx, fence(j, h.at(now)))
	})
	if r.Attempt != j.Attempt || r.Executions != j.Executions+1 || r.LeaseToken != j.LeaseToken {
		h.t.Errorf("JobStart of job %d: attempt %d→%d executions %d→%d token changed %v; want same attempt, executions+1, same token",
			j.ID, j.Attempt, r.Attempt, j.Executions, r.Executions, r.LeaseToken != j.LeaseToken)
	}
	if r.StartedAt == nil || !r.StartedAt.Equal(h.tm(now)) {
		h.t.Errorf("JobStart of job %d: started_at = %s, want Now = %s", j.ID, fmtTimePtr(r.StartedAt), fmtTime(h.tm(now)))
	}
	return r
}

func (h *harness) mustComplete(j *driver.Job, now time.Duration, result json.RawMessage) *driver.Job {
	h.t.Helper()
	r := h.transition("JobComplete", j.ID, lifecycle.EventSucceeded, lifecycle.StatusSucceeded, func() (*driver.Job, error) {
		return h.d.JobComplete(h.ctx, driver.CompleteParams{FenceParams: fence(j, h.at(now)), Result: result})
	})
	want := result
	if want == nil {
		want = json.RawMessage("null")
	}
	if !jsonEqual(r.Result, want) {
		h.t.Errorf("JobComplete of job %d: result = %s, want %s", j.ID, r.Result, want)
	}
	if r.FinishedAt == nil || !r.FinishedAt.Equal(h.tm(now)) {
		h.t.Errorf("JobComplete of job %d: finished_at = %s, want Now = %s", j.ID, fmtTimePtr(r.FinishedAt), fmtTime(h.tm(now)))
	}
	if r.Attempt != j.Attempt || r.Executions != j.Executions {
		h.t.Errorf("JobComplete of job %d: attempt %d→%d executions %d→%d, want unchanged", j.ID, j.Attempt, r.Attempt, j.Executions, r.Executions)
	}
	return r
}

// mustFail reports a failure; want is queued (retry) or failed.
func (h *harness) mustFail(j *driver.Job, p driver.FailParams, want lifecycle.Status) *driver.Job {
	h.t.Helper()
	typ := lifecycle.EventRetried
	if want == lifecycle.StatusFailed {
		typ = lifecycle.EventFailed
	}
	p.FenceParams.ID, p.FenceParams.Attempt, p.FenceParams.LeaseToken = j.ID, j.Attempt, j.LeaseToken
	r := h.transition("JobFail", j.ID, typ, want, func() (*driver.Job, error) { return h.d.JobFail(h.ctx, p) })
	if len(r.Errors) != len(j.Errors)+1 {
		h.t.Fatalf("JobFail of job %d: %d error history entries → %d, want +1", j.ID, len(j.Errors), len(r.Errors))
	}
	last := r.Errors[len(r.Errors)-1]
	if last.Attempt != j.Attempt || last.Error != p.Error || last.Stack != p.Stack {
		h.t.Errorf("JobFail of job %d: last error entry = %+v, want attempt %d error %q stack %q", j.ID, last, j.Attempt, p.Error, p.Stack)
	}
	if p.Now != nil && !last.At.Equal(*p.Now) {
		h.t.Errorf("JobFail of job %d: error entry at %s, want Now = %s", j.ID, fmtTime(last.At), fmtTime(*p.Now))
	}
	if r.Attempt != j.Attempt || r.Executions != j.Executions {
		h.t.Errorf("JobFail of job %d: attempt %d→%d executions %d→%d, want unchanged", j.ID, j.Attempt, r.Attempt, j.Executions, r.Executions)
	}
	switch want {
	case lifecycle.StatusQueued:
		if !r.RunAt.Equal(p.RetryAt) {
			h.t.Errorf("JobFail (retry) of job %d: run_at = %s, want RetryAt = %s", j.ID, fmtTime(r.RunAt), fmtTime(p.RetryAt))
		}
		if r.FinishedAt != nil {
			h.t.Errorf("JobFail (retry) of job %d: finished_at = %s, want nil", j.ID, fmtTimePtr(r.FinishedAt))
		}
	case lifecycle.StatusFailed:
		if r.Error != p.Error {
			h.t.Errorf("JobFail of job %d: error = %q, want %q", j.ID, r.Error, p.Error)
		}
		if r.FinishedAt == nil {
			h.t.Errorf("JobFail of job %d: failed without finished_at", j.ID)
		}
	}
	return r
}

func failParams(now *time.Time, msg string, retryAt time.Time, permanent bool) driver.FailParams {
	return driver.FailParams{FenceParams: driver.FenceParams{Now: now}, Error: msg, Stack: "stack of " + msg, RetryAt: retryAt, Permanent: permanent}
}

func (h *harness) mustSnooze(j *driver.Job, now time.Duration, runAt time.Time) *driver.Job {
	h.t.Helper()
	r := h.transition("JobSnooze", j.ID, lifecycle.EventSnoozed, lifecycle.StatusQueued, func() (*driver.Job, error) {
		return h.d.JobSnooze(h.ctx, driver.SnoozeParams{FenceParams: fence(j, h.at(now)), RunAt: runAt})
	})
	if !r.RunAt.Equal(runAt) || r.Executions != j.Executions-1 || r.Attempt != j.Attempt || len(r.Errors) != len(j.Errors) {
		h.t.Errorf("JobSnooze of job %d: run_at %s executions %d attempt %d errors %d; want run_at %s executions %d attempt %d errors %d",
			j.ID, fmtTime(r.RunAt), r.Executions, r.Attempt, len(r.Errors), fmtTime(runAt), j.Executions-1, j.Attempt, len(j.Errors))
	}
	return r
}

func (h *harness) mustUnclaim(j *driver.Job, now time.Duration) *driver.Job {
	h.t.Helper()
	r := h.transition("JobUnclaim", j.ID, lifecycle.EventUnclaimed, lifecycle.StatusQueued, func() (*driver.Job, error) {
		return h.d.JobUnclaim(h.ctx, fence(j, h.at(now)))
	})
	if r.Attempt != j.Attempt || r.Executions != j.Executions {
		h.t.Errorf("JobUnclaim of job %d: attempt %d→%d executions %d→%d, want unchanged", j.ID, j.Attempt, r.Attempt, j.Executions, r.Executions)
	}
	return r
}

func (h *harness) mustCancel(id int64, now time.Duration) *driver.Job {
	h.t.Helper()
	r := h.transition("JobCancel", id, lifecycle.EventCanceled, lifecycle.StatusCanceled, func() (*driver.Job, error) {
		return h.d.JobCancel(h.ctx, driver.CancelParams{ID: id, Actor: "operator", Now: h.at(now)})
	})
	if r.FinishedAt == nil {
		h.t.Errorf("JobCancel of job %d: canceled without finished_at", id)
	}
	return r
}

// mustHeartbeat extends j's lease at t0+now: rev+1, no event, new expiry.
func (h *harness) mustHeartbeat(j *driver.Job, now time.Duration) driver.HeartbeatResult {
	h.t.Helper()
	before := h.snap(j.ID)
	p := driver.HeartbeatParams{FenceParams: fence(j, h.at(now))}
	p.LeaseDuration = leaseDuration
	res, err := h.d.JobHeartbeat(h.ctx, p)
	if err != nil {
		h.t.Fatalf("JobHeartbeat of job %d (%s): %v", j.ID, before.job.Status, err)
	}
	if res.CancelRequested {
		h.t.Errorf("JobHeartbeat of job %d: CancelRequested = true, want false", j.ID)
	}
	if want := h.tm(now).Add(leaseDuration); !res.LeaseExpiresAt.Equal(want) {
		h.t.Errorf("JobHeartbeat of job %d: LeaseExpiresAt = %s, want Now+LeaseDuration = %s", j.ID, fmtTime(res.LeaseExpiresAt), fmtTime(want))
	}
	after := h.snap(j.ID)
	if after.job.Rev != before.job.Rev+1 {
		h.t.Errorf("JobHeartbeat of job %d: rev %d → %d, want +1", j.ID, before.job.Rev, after.job.Rev)
	}
	if after.job.Status != before.job.Status || after.job.Attempt != before.job.Attempt || after.job.LeaseToken != before.job.LeaseToken {
		h.t.Errorf("JobHeartbeat of job %d changed more than the lease: %s", j.ID, diffJobs(before.job, after.job))
	}
	if after.job.LeaseExpiresAt == nil || !after.job.LeaseExpiresAt.Equal(res.LeaseExpiresAt) {
		h.t.Errorf("JobHeartbeat of job %d: stored lease_expires_at = %s, want %s", j.ID, fmtTimePtr(after.job.LeaseExpiresAt), fmtTime(res.LeaseExpiresAt))
	}
	if len(after.events) != len(before.events) {
		h.t.Errorf("JobHeartbeat of job %d appended events: %d → %d, want none", j.ID, len(before.events), len(after.events))
	}
	h.checkJob(after.job, "after JobHeartbeat")
	return res
}

// mustReap runs the reaper at t0+now and checks each reaped job.
func (h *harness) mustReap(now time.Duration) []*driver.Job {
	h.t.Helper()
	jobs, err := h.d.JobReapExpired(h.ctx, driver.ReapParams{Limit: 1000, Now: h.at(now)})
	if err != nil {
		h.t.Fatalf("JobReapExpired(now %s): %v", fmtTime(h.tm(now)), err)
	}
	for _, j := range jobs {
		h.checkJob(j, "JobReapExpired")
		if d := diffJobs(j, h.get(j.ID)); d != "" {
			h.t.Errorf("JobReapExpired: returned job %d differs from JobGet: %s", j.ID, d)
		}
	}
	return jobs
}

func (h *harness) get(id int64) *driver.Job {
	h.t.Helper()
	j, err := h.d.JobGet(h.ctx, id)
	if err != nil {
		h.t.Fatalf("JobGet(%d): %v", id, err)
	}
	h.checkJob(j, "JobGet")
	return j
}

func (h *harness) events(id int64) []lifecycle.Event {
	h.t.Helper()
	evs, err := h.d.JobEvents(h.ctx, id)
	if err != nil {
		h.t.Fatalf("JobEvents(%d): %v", id, err)
	}
	return evs
}

// snapshot is a job row and its log, to prove a rejected call changed nothing.
type snapshot struct {
	job    *driver.Job
	events []lifecycle.Event
}

func (h *harness) snap(id int64) snapshot {
	h.t.Helper()
	return snapshot{job: h.get(id), events: h.events(id)}
}

// wantUnchanged asserts job before.job.ID is exactly as in before.
func (h *harness) wantUnchanged(before snapshot, what string) {
	h.t.Helper()
	after := h.snap(before.job.ID)
	if d := diffJobs(before.job, after.job); d != "" {
		h.t.Errorf("%s changed job %d: %s", what, before.job.ID, d)
	}
	if a, b := fmtEvents(before.events), fmtEvents(after.events); a != b {
		h.t.Errorf("%s changed the events of job %d:\nbefore %s\nafter  %s", what, before.job.ID, a, b)
	}
}

// wantErr asserts errors.Is(err, target).
func (h *harness) wantErr(err, target error, what string) {
	h.t.Helper()
	if !errors.Is(err, target) {
		h.t.Errorf("%s: err = %v, want errors.Is(err, %q)", what, err, target)
	}
}

// rejected runs a call that must fail with target and change nothing on job id.
// namingField checks that err, if a ValidationError, names field, and returns
// err (for rejected, which checks its kind).
func (h *harness) namingField(what, field string, err error) error {
	h.t.Helper()
	var ve *driver.ValidationError
	if errors.As(err, &ve) && ve.Field != field {
		h.t.Errorf("%s: refused naming %q, want %s", what, ve.Field, field)
	}
	return err
}

// refusedReused asserts that call is refused as a reuse of another call's
// request_id (driver.ErrRequestReused, which is ErrInvalidArgument too, on a
// ValidationError naming request_id) and changes nothing of job id.
func (h *harness) refusedReused(id int64, what string, call func() error) {
	h.t.Helper()
	h.rejected(id, driver.ErrRequestReused, what, func() error {
		err := call()
		h.wantErr(err, driver.ErrInvalidArgument, what)
		return h.namingField(what, "request_id", err)
	})
}

// rejected asserts that call fails with target and changes nothing of job id.
// A call the job's state refused (ErrLeaseLost, ErrInvalidTransition) says so
// in one wording on every driver (driver.Refused): the job's status and
// attempt as they are.
func (h *harness) rejected(id int64, target error, what string, call func() error) {
	h.t.Helper()
	before := h.snap(id)
	err := call()
	h.wantErr(err, target, what)
	if err != nil && (target == driver.ErrLeaseLost || target == driver.ErrInvalidTransition) {
		want := fmt.Sprintf("job %d (now %s, attempt %d): %s", id, before.job.Status, before.job.Attempt, target)
		if !strings.Contains(err.Error(), want) {
			h.t.Errorf("%s: error %q, want it to say %q", what, err, want)
		}
	}
	h.wantUnchanged(before, what)
}

// checkJob asserts the per-status invariants and UTC times.
func (h *harness) checkJob(j *driver.Job, what string) {
	h.t.Helper()
	if err := lifecycle.CheckInvariants(j.State()); err != nil {
		h.t.Errorf("%s: job %d (%s) breaks invariants: %v", what, j.ID, j.Status, err)
	}
	times := map[string]*time.Time{"run_at": &j.RunAt, "created_at": &j.CreatedAt,
		"started_at": j.StartedAt, "finished_at": j.FinishedAt, "lease_expires_at": j.LeaseExpiresAt}
	for name, tp := range times {
		if tp != nil && tp.Location() != time.UTC {
			h.t.Errorf("%s: job %d %s = %s is in %s, want UTC", what, j.ID, name, tp, tp.Location())
		}
	}
}

// checkAll asserts invariants and a legal history for every job in the database.
func (h *harness) checkAll() {
	h.t.Helper()
	if c, ok := h.d.(invariantChecker); ok {
		if err := c.CheckInvariants(h.ctx); err != nil {
			h.t.Errorf("final check: the driver's own invariants: %v", err)
		}
	}
	var after int64
	for {
		jobs, err := h.d.JobList(h.ctx, driver.ListParams{Ascending: true, AfterID: after, Limit: 500})
		if err != nil {
			h.t.Errorf("final check: JobList: %v", err)
			return
		}
		if len(jobs) == 0 {
			return
		}
		for _, j := range jobs {
			// Past this job whatever its check finds: the page is asked
			// for again from here, and a job that failed a check last on
			// its page was listed, and reported, for ever.
			after = j.ID
			h.checkJob(j, "final check")
			evs, err := h.d.JobEvents(h.ctx, j.ID)
			if err != nil {
				h.t.Errorf("final check: JobEvents(%d): %v", j.ID, err)
				continue
			}
			if err := lifecycle.CheckHistory(evs); err != nil {
				h.t.Errorf("final check: job %d has an illegal history: %v\n%s", j.ID, err, fmtEvents(evs))
				continue
			}
			last := evs[len(evs)-1]
			if last.To != j.Status || last.Seq > j.Rev || last.Attempt != j.Attempt {
				h.t.Errorf("final check: job %d is %s rev %d attempt %d but its last event is %s", j.ID, j.Status, j.Rev, j.Attempt, fmtEvent(last))
			}
		}
	}
}

// invariantChecker is a driver that can check its own storage for
// disagreements (pgdriver: the sets kept beside the job rows).
type invariantChecker interface {
	CheckInvariants(ctx context.Context) error
}

// listAll pages through JobList with filter p.
func (h *harness) listAll(p driver.ListParams) []*driver.Job {
	h.t.Helper()
	var out []*driver.Job
	for {
		jobs, err := h.d.JobList(h.ctx, p)
		if err != nil {
			h.t.Fatalf("JobList(%+v): %v", p, err)
		}
		if len(jobs) == 0 {
			return out
		}
		out = append(out, jobs...)
		p.AfterID = jobs[len(jobs)-1].ID
	}
}

func jobIDs(jobs []*driver.Job) []int64 {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// runningJob enqueues a job (edit applied), claims it at t0 and starts it at t0+1s.
func (h *harness) runningJob(edit func(p *driver.InsertParams)) *driver.Job {
	h.t.Helper()
	j := h.mustEnqueue(edit)
	c := h.mustClaimOne(driver.ClaimParams{Queues: []string{j.Queue}, ID: j.ID, Limit: 1, Owner: owner,
		LeaseDuration: leaseDuration, Now: h.at(0)})
	return h.mustStart(c, time.Second)
}

// runningBatch enqueues n jobs, claims them in one claim at t0 (lease until
// t0+30s) and starts each at t0+1s.
func (h *harness) runningBatch(n int) []*driver.Job {
	h.t.Helper()
	for range n {
		h.mustEnqueue(nil)
	}
	jobs := h.mustClaimN(driver.ClaimParams{Queues: []string{defaultQueue}, Limit: n, Owner: owner,
		LeaseDuration: leaseDuration, Now: h.at(0)})
	if len(jobs) != n {
		h.t.Fatalf("claimed %d jobs, want %d", len(jobs), n)
	}
	for i, j := range jobs {
		jobs[i] = h.mustStart(j, time.Second)
	}
	return jobs
}

// claimedJob enqueues a job and claims it by id at t0.
func (h *harness) claimedJob(edit func(p *driver.InsertParams)) *driver.Job {
	h.t.Helper()
	j := h.mustEnqueue(edit)
	return h.mustClaimOne(driver.ClaimParams{Queues: []string{j.Queue}, ID: j.ID, Limit: 1, Owner: owner,
		LeaseDuration: leaseDuration, Now: h.at(0)})
}
