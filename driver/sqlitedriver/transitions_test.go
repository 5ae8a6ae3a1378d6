package sqlitedriver

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// fixture is one driver with a test clock t0; at(off) is t0+off for Now fields.
type fixture struct {
	t   *testing.T
	ctx context.Context
	d   *Driver
	t0  time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Parallel()
	return &fixture{t: t, ctx: context.Background(), d: openTest(t), t0: time.Now().UTC().Truncate(time.Millisecond)}
}

func (f *fixture) at(off time.Duration) *time.Time { x := f.t0.Add(off); return &x }

func (f *fixture) enqueue(edit func(p *driver.InsertParams)) *driver.Job {
	f.t.Helper()
	p := params("default")
	p.RunAt = f.at(-time.Second)
	if edit != nil {
		edit(&p)
	}
	res, err := f.d.JobInsertMany(f.ctx, []driver.InsertParams{p})
	if err != nil {
		f.t.Fatalf("JobInsertMany: %v", err)
	}
	return res[0].Job
}

func (f *fixture) claim(p driver.ClaimParams) []*driver.Job {
	f.t.Helper()
	if p.Owner == "" {
		p.Owner = "w1"
	}
	if p.Queues == nil {
		p.Queues = []string{"default"}
	}
	if p.LeaseDuration == 0 {
		p.LeaseDuration = 30 * time.Second
	}
	if p.Now == nil {
		p.Now = f.at(0)
	}
	jobs, err := f.d.JobClaim(f.ctx, p)
	if err != nil {
		f.t.Fatalf("JobClaim(%+v): %v", p, err)
	}
	return jobs
}

// running enqueues, claims by id at t0 (lease to t0+30s) and starts at t0+1s.
func (f *fixture) running(edit func(p *driver.InsertParams)) *driver.Job {
	f.t.Helper()
	j := f.enqueue(edit)
	c := f.claim(driver.ClaimParams{ID: j.ID})
	if len(c) != 1 {
		f.t.Fatalf("claim of job %d got %d jobs", j.ID, len(c))
	}
	r, err := f.d.JobStart(f.ctx, fp(c[0], f.at(time.Second)))
	if err != nil {
		f.t.Fatalf("JobStart: %v", err)
	}
	return r
}

func fp(j *driver.Job, now *time.Time) driver.FenceParams {
	return driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, Now: now}
}

// history returns the job's event types and checks the log is legal.
func (f *fixture) history(id int64) []lifecycle.EventType {
	f.t.Helper()
	evs, err := f.d.JobEvents(f.ctx, id)
	if err != nil {
		f.t.Fatalf("JobEvents(%d): %v", id, err)
	}
	if err := lifecycle.CheckHistory(evs); err != nil {
		f.t.Errorf("job %d: illegal history: %v", id, err)
	}
	j, err := f.d.JobGet(f.ctx, id)
	if err != nil {
		f.t.Fatalf("JobGet(%d): %v", id, err)
	}
	if err := lifecycle.CheckInvariants(j.State()); err != nil {
		f.t.Errorf("job %d: %v", id, err)
	}
	out := make([]lifecycle.EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func (f *fixture) wantHistory(id int64, want ...lifecycle.EventType) {
	f.t.Helper()
	got := f.history(id)
	if len(got) != len(want) {
		f.t.Fatalf("job %d history = %v, want %v", id, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			f.t.Fatalf("job %d history = %v, want %v", id, got, want)
		}
	}
}

func TestFailRetriesThenFails(t *testing.T) {
	f := newFixture(t)
	r := f.running(func(p *driver.InsertParams) { p.MaxAttempts = 2 })
	q, err := f.d.JobFail(f.ctx, driver.FailParams{FenceParams: fp(r, f.at(2*time.Second)), Error: "boom", Stack: "s", RetryAt: f.t0.Add(time.Minute)})
	if err != nil || q.Status != lifecycle.StatusQueued || !q.RunAt.Equal(f.t0.Add(time.Minute)) || len(q.Errors) != 1 || q.Error != "" {
		t.Fatalf("first JobFail = %+v, %v; want queued at t0+1m with one error entry", q, err)
	}
	if e := q.Errors[0]; e.Attempt != 1 || e.Error != "boom" || e.Stack != "s" || !e.At.Equal(f.t0.Add(2*time.Second)) {
		t.Fatalf("error entry = %+v", e)
	}
	if got := f.claim(driver.ClaimParams{Now: f.at(59 * time.Second)}); len(got) != 0 {
		t.Fatalf("claimed %d jobs before run_at", len(got))
	}
	c := f.claim(driver.ClaimParams{Now: f.at(time.Minute)})[0]
	r2, err := f.d.JobStart(f.ctx, fp(c, f.at(61*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	failed, err := f.d.JobFail(f.ctx, driver.FailParams{FenceParams: fp(r2, f.at(62*time.Second)), Error: "again", RetryAt: f.t0.Add(2 * time.Minute)})
	if err != nil || failed.Status != lifecycle.StatusFailed || failed.Error != "again" || len(failed.Errors) != 2 || failed.FinishedAt == nil {
		t.Fatalf("second JobFail = %+v, %v; want failed with two entries", failed, err)
	}
	f.wantHistory(r.ID, "enqueued", "claimed", "started", "retried", "claimed", "started", "failed")
}

func TestPermanentFailAndSnooze(t *testing.T) {
	f := newFixture(t)
	r := f.running(nil)
	s, err := f.d.JobSnooze(f.ctx, driver.SnoozeParams{FenceParams: fp(r, f.at(2*time.Second)), RunAt: f.t0.Add(time.Hour)})
	if err != nil || s.Status != lifecycle.StatusQueued || s.Executions != 0 || !s.RunAt.Equal(f.t0.Add(time.Hour)) {
		t.Fatalf("JobSnooze = %+v, %v", s, err)
	}
	c := f.claim(driver.ClaimParams{Now: f.at(time.Hour)})[0]
	r2, err := f.d.JobStart(f.ctx, fp(c, f.at(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	failed, err := f.d.JobFail(f.ctx, driver.FailParams{FenceParams: fp(r2, f.at(time.Hour)), Error: "bad input", Permanent: true})
	if err != nil || failed.Status != lifecycle.StatusFailed || failed.Attempt != 2 || failed.Executions != 1 {
		t.Fatalf("permanent JobFail = %+v, %v", failed, err)
	}
	f.wantHistory(r.ID, "enqueued", "claimed", "started", "snoozed", "claimed", "started", "failed")
}

func TestFencing(t *testing.T) {
	f := newFixture(t)
	r := f.running(nil)
	stale := fp(r, f.at(2*time.Second))
	stale.Attempt++
	if _, err := f.d.JobComplete(f.ctx, driver.CompleteParams{FenceParams: stale}); !errors.Is(err, driver.ErrLeaseLost) {
		t.Errorf("complete with a wrong attempt: %v, want ErrLeaseLost", err)
	}
	if _, err := f.d.JobStart(f.ctx, fp(r, nil)); !errors.Is(err, driver.ErrLeaseLost) {
		t.Errorf("start of a running job: %v, want ErrLeaseLost", err)
	}
	if _, err := f.d.JobUnclaim(f.ctx, fp(r, nil)); !errors.Is(err, driver.ErrLeaseLost) {
		t.Errorf("unclaim of a running job: %v, want ErrLeaseLost", err)
	}
	ghost := fp(r, nil)
	ghost.ID = 9999
	if _, err := f.d.JobComplete(f.ctx, driver.CompleteParams{FenceParams: ghost}); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("complete of a missing job: %v, want ErrNotFound", err)
	}
	if _, err := f.d.JobHeartbeat(f.ctx, driver.HeartbeatParams{FenceParams: stale}); !errors.Is(err, driver.ErrLeaseLost) {
		t.Errorf("heartbeat with a wrong attempt: %v, want ErrLeaseLost", err)
	}
	if _, err := f.d.JobComplete(f.ctx, driver.CompleteParams{FenceParams: fp(r, nil), Result: json.RawMessage(`{bad`)}); !errors.Is(err, driver.ErrInvalidArgument) {
		t.Errorf("complete with invalid JSON: %v, want ErrInvalidArgument", err)
	}
	f.wantHistory(r.ID, "enqueued", "claimed", "started")
}

func TestCancelAndHeartbeat(t *testing.T) {
	f := newFixture(t)
	r := f.running(nil)
	c, err := f.d.JobCancel(f.ctx, driver.CancelParams{ID: r.ID, Now: f.at(2 * time.Second), RequestID: "cancel-1"})
	if err != nil || c.Status != lifecycle.StatusCanceled || c.Owner != "" || c.FinishedAt == nil || c.Error != "" {
		t.Fatalf("JobCancel = %+v, %v", c, err)
	}
	again, err := f.d.JobCancel(f.ctx, driver.CancelParams{ID: r.ID, RequestID: "cancel-1"})
	if err != nil || !again.Replayed || again.Rev != c.Rev {
		t.Fatalf("repeated JobCancel = %+v, %v; want replayed", again, err)
	}
	if _, err := f.d.JobCancel(f.ctx, driver.CancelParams{ID: r.ID}); !errors.Is(err, driver.ErrInvalidTransition) {
		t.Fatalf("cancel of a canceled job: %v, want ErrInvalidTransition", err)
	}
	if _, err := f.d.JobCancel(f.ctx, driver.CancelParams{ID: 9999}); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("cancel of a missing job: %v, want ErrNotFound", err)
	}
	hb, err := f.d.JobHeartbeat(f.ctx, driver.HeartbeatParams{FenceParams: fp(r, f.at(3*time.Second))})
	if err != nil || !hb.CancelRequested {
		t.Fatalf("heartbeat after cancel = %+v, %v; want CancelRequested", hb, err)
	}
	evs, _ := f.d.JobEvents(f.ctx, r.ID)
	if last := evs[len(evs)-1]; last.Actor != "operator" || last.From != lifecycle.StatusRunning {
		t.Errorf("cancel event = %+v, want actor operator from running", last)
	}
	f.wantHistory(r.ID, "enqueued", "claimed", "started", "canceled")
}

func TestReaper(t *testing.T) {
	f := newFixture(t)
	claimed := f.enqueue(nil)
	f.claim(driver.ClaimParams{ID: claimed.ID})
	running := f.running(nil)
	exhausted := f.running(func(p *driver.InsertParams) { p.MaxAttempts = 1 })

	if got, err := f.d.JobReapExpired(f.ctx, driver.ReapParams{Now: f.at(30 * time.Second)}); err != nil || len(got) != 0 {
		t.Fatalf("reap at the expiry instant = %v, %v; want nothing (strictly before now)", got, err)
	}
	wake, _ := f.d.WakeupSubscribe(f.ctx)
	got, err := f.d.JobReapExpired(f.ctx, driver.ReapParams{Now: f.at(31 * time.Second)})
	if err != nil || len(got) != 3 {
		t.Fatalf("JobReapExpired = %v, %v; want 3 jobs", got, err)
	}
	byID := map[int64]*driver.Job{}
	for _, j := range got {
		byID[j.ID] = j
	}
	if j := byID[claimed.ID]; j.Status != lifecycle.StatusQueued || len(j.Errors) != 0 || !j.RunAt.Equal(f.t0.Add(31*time.Second)) {
		t.Errorf("reaped claimed job = %+v", j)
	}
	if j := byID[running.ID]; j.Status != lifecycle.StatusQueued || len(j.Errors) != 1 || j.Executions != 1 {
		t.Errorf("reaped running job = %+v", j)
	}
	if j := byID[exhausted.ID]; j.Status != lifecycle.StatusFailed || j.Error == "" || len(j.Errors) != 1 {
		t.Errorf("reaped exhausted job = %+v", j)
	}
	if q := <-wake; q != "default" {
		t.Errorf("wake-up after reap = %q, want default", q)
	}
	f.wantHistory(claimed.ID, "enqueued", "claimed", "stalled", "requeued")
	f.wantHistory(running.ID, "enqueued", "claimed", "started", "stalled", "requeued")
	f.wantHistory(exhausted.ID, "enqueued", "claimed", "started", "stalled", "failed")
}

func TestClaimOrderPauseAndReplay(t *testing.T) {
	f := newFixture(t)
	low := f.enqueue(func(p *driver.InsertParams) { p.Priority = 5 })
	first := f.enqueue(func(p *driver.InsertParams) { p.RunAt = f.at(-time.Minute) })
	second := f.enqueue(nil)
	future := f.enqueue(func(p *driver.InsertParams) { p.RunAt = f.at(time.Hour) })
	other := f.enqueue(func(p *driver.InsertParams) { p.Queue = "other" })

	if err := f.d.QueuePause(f.ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if got := f.claim(driver.ClaimParams{ID: other.ID, Queues: []string{"other"}}); len(got) != 0 {
		t.Fatalf("claimed job %d of a paused queue", other.ID)
	}
	if got := f.claim(driver.ClaimParams{ID: future.ID}); len(got) != 0 {
		t.Fatalf("claimed job %d before its run_at", future.ID)
	}

	got := f.claim(driver.ClaimParams{Queues: []string{"default", "other"}, Limit: 10, RequestID: "claim-1"})
	want := []int64{first.ID, second.ID, low.ID}
	if len(got) != len(want) {
		t.Fatalf("claimed %d jobs, want %v", len(got), want)
	}
	for i, j := range got {
		if j.ID != want[i] || j.Replayed {
			t.Fatalf("claim order: got job %d (replayed %v) at %d, want %v", j.ID, j.Replayed, i, want)
		}
	}
	replay := f.claim(driver.ClaimParams{Queues: []string{"default"}, Limit: 10, RequestID: "claim-1"})
	if len(replay) != 3 || !replay[0].Replayed || replay[0].LeaseToken != got[0].LeaseToken {
		t.Fatalf("replayed claim = %v, want the same 3 jobs replayed", replay)
	}

	qs, err := f.d.QueueList(f.ctx)
	if err != nil || len(qs) != 2 || qs[0].Name != "default" || qs[1].Name != "other" || !qs[1].Paused ||
		qs[0].Counts[lifecycle.StatusClaimed] != 3 || qs[0].Counts[lifecycle.StatusQueued] != 1 || qs[1].Counts[lifecycle.StatusQueued] != 1 {
		t.Fatalf("QueueList = %+v, %v", qs, err)
	}
	if ready, _ := f.d.QueuesReady(f.ctx, f.at(2*time.Hour)); len(ready) != 1 || ready[0] != "default" {
		t.Fatalf("QueuesReady = %v, want [default]", ready)
	}
	if err := f.d.QueueResume(f.ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if got := f.claim(driver.ClaimParams{ID: other.ID}); len(got) != 1 {
		t.Fatalf("claim after resume got %d jobs", len(got))
	}
	if err := f.d.QueuePause(f.ctx, "bad name"); !errors.Is(err, driver.ErrInvalidArgument) {
		t.Fatalf("pause of a bad name: %v, want ErrInvalidArgument", err)
	}
}

func TestCompleteMany(t *testing.T) {
	f := newFixture(t)
	a, b := f.running(nil), f.running(nil)
	stale := fp(b, f.at(2*time.Second))
	stale.LeaseToken = "00000000-0000-4000-8000-000000000000"
	out := f.d.JobCompleteMany(f.ctx, []driver.CompleteParams{
		{FenceParams: fp(a, f.at(2*time.Second)), Result: json.RawMessage(`1`)},
		{FenceParams: stale},
	})
	if out[0].Err != nil || out[0].Job.Status != lifecycle.StatusSucceeded {
		t.Errorf("outcome 0 = %+v, want succeeded", out[0])
	}
	if !errors.Is(out[1].Err, driver.ErrLeaseLost) || out[1].Job != nil {
		t.Errorf("outcome 1 = %+v, want ErrLeaseLost", out[1])
	}
	f.wantHistory(a.ID, "enqueued", "claimed", "started", "succeeded")
	f.wantHistory(b.ID, "enqueued", "claimed", "started")
}

func TestDLQAndRetention(t *testing.T) {
	f := newFixture(t)
	r := f.running(func(p *driver.InsertParams) {
		p.MaxAttempts = 1
		p.Timeout = 5 * time.Second
		p.Metadata = json.RawMessage(`{"m":1}`)
	})
	failed, err := f.d.JobFail(f.ctx, driver.FailParams{FenceParams: fp(r, f.at(2*time.Second)), Error: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.d.JobDLQRequeue(f.ctx, driver.DLQRequeueParams{ID: f.enqueue(nil).ID}); !errors.Is(err, driver.ErrInvalidTransition) {
		t.Fatalf("requeue of a queued job: %v, want ErrInvalidTransition", err)
	}
	n, err := f.d.JobDLQRequeue(f.ctx, driver.DLQRequeueParams{ID: failed.ID, Actor: "alice"})
	if err != nil || n.Status != lifecycle.StatusQueued || n.RetryOf == nil || *n.RetryOf != failed.ID ||
		n.Timeout != 5*time.Second || string(n.Metadata) != `{"m":1}` || n.ID == failed.ID {
		t.Fatalf("JobDLQRequeue = %+v, %v", n, err)
	}
	evs, _ := f.d.JobEvents(f.ctx, n.ID)
	if len(evs) != 1 || evs[0].Actor != "alice" {
		t.Fatalf("requeued job events = %+v", evs)
	}

	if n, err := f.d.JobDeleteFinished(f.ctx, driver.DeleteFinishedParams{Before: f.t0}); err != nil || n != 0 {
		t.Fatalf("JobDeleteFinished before the failure = %d, %v; want 0", n, err)
	}
	if n, err := f.d.JobDLQPurge(f.ctx, driver.DLQPurgeParams{Queue: "elsewhere"}); err != nil || n != 0 {
		t.Fatalf("JobDLQPurge of another queue = %d, %v; want 0", n, err)
	}
	if n, err := f.d.JobDeleteFinished(f.ctx, driver.DeleteFinishedParams{Before: f.t0.Add(time.Minute)}); err != nil || n != 1 {
		t.Fatalf("JobDeleteFinished = %d, %v; want 1", n, err)
	}
	if _, err := f.d.JobEvents(f.ctx, failed.ID); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("events of a deleted job: %v, want ErrNotFound", err)
	}
}

func TestJobList(t *testing.T) {
	f := newFixture(t)
	var ids []int64
	for i := 0; i < 5; i++ {
		ids = append(ids, f.enqueue(func(p *driver.InsertParams) {
			if i%2 == 1 {
				p.Kind = "odd"
			}
		}).ID)
	}
	desc, err := f.d.JobList(f.ctx, driver.ListParams{Limit: 2, AfterID: ids[3]})
	if err != nil || len(desc) != 2 || desc[0].ID != ids[2] || desc[1].ID != ids[1] {
		t.Fatalf("JobList desc after %d = %v, %v", ids[3], desc, err)
	}
	asc, err := f.d.JobList(f.ctx, driver.ListParams{Ascending: true, Kind: "odd", Statuses: []lifecycle.Status{lifecycle.StatusQueued}})
	if err != nil || len(asc) != 2 || asc[0].ID != ids[1] || asc[1].ID != ids[3] {
		t.Fatalf("JobList asc kind odd = %v, %v", asc, err)
	}
	none, err := f.d.JobList(f.ctx, driver.ListParams{Statuses: []lifecycle.Status{lifecycle.StatusFailed}})
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("JobList failed = %v, %v; want an empty slice", none, err)
	}
}

func TestLeader(t *testing.T) {
	f := newFixture(t)
	if _, err := f.d.LeaderGet(f.ctx); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("LeaderGet with no leader: %v, want ErrNotFound", err)
	}
	elect := func(id string, off time.Duration) bool {
		t.Helper()
		ok, err := f.d.LeaderAttemptElect(f.ctx, driver.LeaderParams{ID: id, TTL: 10 * time.Second, Now: f.at(off)})
		if err != nil {
			t.Fatalf("LeaderAttemptElect(%s): %v", id, err)
		}
		return ok
	}
	if !elect("a", 0) || elect("b", time.Second) || !elect("a", 5*time.Second) {
		t.Fatal("a should lead and extend; b should not")
	}
	if l, err := f.d.LeaderGet(f.ctx); err != nil || l.ID != "a" || !l.ExpiresAt.Equal(f.t0.Add(15*time.Second)) {
		t.Fatalf("LeaderGet = %+v, %v", l, err)
	}
	if elect("b", 15*time.Second) || !elect("b", 16*time.Second) {
		t.Fatal("b should take over only after a's lease expired")
	}
	if err := f.d.LeaderResign(f.ctx, "a", ""); err != nil {
		t.Fatal(err)
	}
	if l, _ := f.d.LeaderGet(f.ctx); l.ID != "b" {
		t.Fatalf("a's resignation removed b: leader %+v", l)
	}
	if err := f.d.LeaderResign(f.ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	if !elect("c", 17*time.Second) {
		t.Fatal("c should lead after b resigned")
	}
}

func TestWakeupSubscribeEndsWithContext(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(f.ctx)
	ch, err := f.d.WakeupSubscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.d.WakeupPublish(f.ctx, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if got := []string{<-ch, <-ch}; got[0] != "a" || got[1] != "b" {
		t.Fatalf("received %v, want [a b]", got)
	}
	cancel()
	for range ch { // drains until the channel closes; hangs (test timeout) if it never does
	}
}

func TestClaimMergesQueues(t *testing.T) {
	f := newFixture(t)
	a1 := f.enqueue(func(p *driver.InsertParams) { p.Queue = "a"; p.Priority = 1 })
	b0 := f.enqueue(func(p *driver.InsertParams) { p.Queue = "b" })
	a0 := f.enqueue(func(p *driver.InsertParams) { p.Queue = "a"; p.RunAt = f.at(-time.Minute) })
	f.enqueue(func(p *driver.InsertParams) { p.Queue = "b"; p.Priority = 2 })

	if got := f.claim(driver.ClaimParams{Queues: []string{}}); len(got) != 0 {
		t.Fatalf("claim with no queues took %d jobs, want none", len(got))
	}
	got := f.claim(driver.ClaimParams{Queues: []string{"b", "a", "b"}, Limit: 3})
	want := []int64{a0.ID, b0.ID, a1.ID} // priority 0 by run_at, then priority 1
	if len(got) != len(want) {
		t.Fatalf("claimed %d jobs, want %v", len(got), want)
	}
	for i := range want {
		if got[i].ID != want[i] {
			t.Fatalf("claim order: job %d at %d, want %v", got[i].ID, i, want)
		}
	}
}
