package sqlitedriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// TestCompleteManyMentionsAndReplays: the set-based batch keeps the per-call
// outcomes of one-at-a-time completions: a job named twice completes for its
// first mention only, a stale first mention lets a good second one through, a
// repeated request_id is answered as a replay, and unknown jobs are not found.
func TestCompleteManyMentionsAndReplays(t *testing.T) {
	f := newFixture(t)
	a, b, c, e := f.running(nil), f.running(nil), f.running(nil), f.running(nil)
	now := f.at(2 * time.Second)
	cp := func(j *driver.Job, res, req string) driver.CompleteParams {
		p := driver.CompleteParams{FenceParams: fp(j, now), Result: json.RawMessage(res)}
		p.RequestID = req
		return p
	}
	staleC := cp(c, `"stale"`, "")
	staleC.LeaseToken = "00000000-0000-4000-8000-000000000000"
	missing := cp(a, `1`, "")
	missing.ID = a.ID + 1000
	out := f.d.JobCompleteMany(f.ctx, []driver.CompleteParams{
		cp(a, `{"n": 1}`, ""), // 0: completes a
		cp(a, `{"n": 2}`, ""), // 1: a again: lease lost
		cp(b, `"b"`, "req-b"), // 2: completes b under req-b
		cp(b, `"b"`, "req-b"), // 3: replay of req-b
		staleC,                // 4: stale token for c: lease lost
		cp(c, `"c"`, ""),      // 5: then c completes
		missing,               // 6: no such job
		cp(e, `{bad`, ""),     // 7: invalid JSON: rejected before any mention
		cp(e, `[1, 2]`, ""),   // 8: so e completes here
	})
	wantOK := func(i int, j *driver.Job, result string, replayed bool) {
		t.Helper()
		o := out[i]
		if o.Err != nil || o.Job == nil || o.Job.ID != j.ID || o.Job.Status != lifecycle.StatusSucceeded || o.Job.Replayed != replayed {
			t.Fatalf("outcome %d = %+v, want job %d succeeded (replayed %v)", i, o, j.ID, replayed)
		}
		if string(o.Job.Result) != result {
			t.Errorf("outcome %d result = %s, want %s as given", i, o.Job.Result, result)
		}
		got, err := f.d.JobGet(f.ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		o.Job.Replayed = false
		if !reflect.DeepEqual(got, o.Job) {
			t.Errorf("outcome %d job = %+v, want the stored row %+v", i, o.Job, got)
		}
	}
	wantOK(0, a, `{"n": 1}`, false)
	wantOK(2, b, `"b"`, false)
	wantOK(3, b, `"b"`, true)
	wantOK(5, c, `"c"`, false)
	wantOK(8, e, `[1, 2]`, false)
	for i, want := range map[int]error{1: driver.ErrLeaseLost, 4: driver.ErrLeaseLost, 6: driver.ErrNotFound, 7: driver.ErrInvalidArgument} {
		if !errors.Is(out[i].Err, want) || out[i].Job != nil {
			t.Errorf("outcome %d = %+v, want %v", i, out[i], want)
		}
	}
	for _, j := range []*driver.Job{a, b, c, e} {
		f.wantHistory(j.ID, "enqueued", "claimed", "started", "succeeded")
		evs, err := f.d.JobEvents(f.ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		last := evs[len(evs)-1]
		wantReq := ""
		if j == b {
			wantReq = "req-b"
		}
		if last.Actor != "worker:w1" || last.RequestID != wantReq || !last.At.Equal(*now) || last.Attempt != 1 {
			t.Errorf("job %d succeeded event = %+v, want actor worker:w1, request_id %q, at %s, attempt 1", j.ID, last, wantReq, now)
		}
	}
	// A request_id already in the log, as the only mention: a replay of the same
	// call, not applied; of another call (a heartbeat's), refused, not applied.
	g := f.running(nil)
	hb := fp(g, f.at(2*time.Second))
	hb.RequestID = "hb-1"
	if _, err := f.d.JobHeartbeat(f.ctx, driver.HeartbeatParams{FenceParams: hb}); err != nil {
		t.Fatal(err)
	}
	out = f.d.JobCompleteMany(f.ctx, []driver.CompleteParams{cp(b, `"b"`, "req-b"), cp(g, `"g"`, "hb-1")})
	if out[0].Err != nil || !out[0].Job.Replayed || out[0].Job.Status != lifecycle.StatusSucceeded {
		t.Errorf("repeated req-b = %+v, want job %d replayed", out[0], b.ID)
	}
	if !errors.Is(out[1].Err, driver.ErrInvalidArgument) {
		t.Errorf("completion under the heartbeat's request_id = %+v, want job %d's completion refused", out[1], g.ID)
	}
	f.wantHistory(b.ID, "enqueued", "claimed", "started", "succeeded")
	f.wantHistory(g.ID, "enqueued", "claimed", "started", "heartbeat")
	if out := f.d.JobStartMany(f.ctx, nil); len(out) != 0 {
		t.Errorf("JobStartMany(nil) = %v, want no outcomes", out)
	}
}

// TestStartManySetBased: starts of several jobs in one batch, one named twice,
// match JobStart one at a time: the lease moves only when asked.
func TestStartManySetBased(t *testing.T) {
	f := newFixture(t)
	for range 3 {
		f.enqueue(nil)
	}
	c := f.claim(driver.ClaimParams{Limit: 3})
	if len(c) != 3 {
		t.Fatalf("claimed %d jobs, want 3", len(c))
	}
	ps := []driver.FenceParams{fp(c[0], f.at(time.Second)), fp(c[1], f.at(time.Second)), fp(c[0], f.at(time.Second)), fp(c[2], f.at(time.Second))}
	ps[1].LeaseDuration = time.Minute
	out := f.d.JobStartMany(f.ctx, ps)
	if !errors.Is(out[2].Err, driver.ErrLeaseLost) {
		t.Errorf("second start of job %d: %+v, want ErrLeaseLost", c[0].ID, out[2])
	}
	for i, k := range []int{0, 1, 3} {
		o := out[k]
		if o.Err != nil || o.Job.Status != lifecycle.StatusRunning || o.Job.Executions != 1 || !o.Job.StartedAt.Equal(*f.at(time.Second)) {
			t.Fatalf("outcome %d = %+v, want running, executions 1, started at t0+1s", k, o)
		}
		wantLease := *c[i].LeaseExpiresAt
		if i == 1 {
			wantLease = f.at(time.Second).Add(time.Minute)
		}
		if !o.Job.LeaseExpiresAt.Equal(wantLease) {
			t.Errorf("outcome %d lease = %s, want %s", k, o.Job.LeaseExpiresAt, wantLease)
		}
		if o.Job.Rev != c[i].Rev+1 {
			t.Errorf("outcome %d rev = %d, want %d", k, o.Job.Rev, c[i].Rev+1)
		}
		f.wantHistory(o.Job.ID, "enqueued", "claimed", "started")
	}
}

// TestClaimStartBatch: a batch claim with Start logs claimed (seq rev-1, with
// the claim's request_id) and started (seq rev, without) for every job, and
// hands each its own lease token, in claim order.
func TestClaimStartBatch(t *testing.T) {
	f := newFixture(t)
	var ids []int64
	for i := range 4 {
		j := f.enqueue(func(p *driver.InsertParams) { p.Priority = 3 - i })
		ids = append([]int64{j.ID}, ids...)
	}
	jobs := f.claim(driver.ClaimParams{Limit: 10, Start: true, RequestID: "claim-1"})
	tokens := map[string]bool{}
	for i, j := range jobs {
		if j.ID != ids[i] {
			t.Errorf("job %d of the claim is %d, want %d (priority order)", i, j.ID, ids[i])
		}
		if j.Status != lifecycle.StatusRunning || j.Attempt != 1 || j.Executions != 1 || j.Rev != 3 || j.Owner != "w1" {
			t.Errorf("claimed job %+v, want running, attempt 1, executions 1, rev 3, owner w1", j)
		}
		tokens[j.LeaseToken] = true
		evs, err := f.d.JobEvents(f.ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		f.wantHistory(j.ID, "enqueued", "claimed", "started")
		if evs[1].Seq != 2 || evs[1].RequestID != "claim-1" || evs[2].Seq != 3 || evs[2].RequestID != "" ||
			evs[1].Actor != "worker:w1" || evs[2].Actor != "worker:w1" {
			t.Errorf("job %d events %+v, want claimed seq 2 request claim-1, started seq 3 no request, by worker:w1", j.ID, evs)
		}
	}
	if len(jobs) != 4 || len(tokens) != 4 {
		t.Errorf("claimed %d jobs with %d distinct tokens, want 4 and 4", len(jobs), len(tokens))
	}
	replay := f.claim(driver.ClaimParams{Limit: 10, Start: true, RequestID: "claim-1"})
	if len(replay) != 4 || !replay[0].Replayed {
		t.Errorf("replayed claim = %d jobs (replayed %v), want the 4 again", len(replay), len(replay) > 0 && replay[0].Replayed)
	}
}

// TestInsertManyOrder: one statement inserts the batch in input order, and each
// result lines up with its params, conflicts included.
func TestInsertManyOrder(t *testing.T) {
	f := newFixture(t)
	pre := f.enqueue(func(p *driver.InsertParams) { p.IdempotencyKey = "k2" })
	mk := func(key, args string) driver.InsertParams {
		p := params("default")
		p.IdempotencyKey, p.Args = key, json.RawMessage(args)
		return p
	}
	ps := []driver.InsertParams{mk("k1", `{"i": 0}`), mk("", `{"i":1}`), mk("k1", `{"i":2}`), mk("k2", `{"i":3}`), mk("", `{ "i": 4 }`)}
	res, err := f.d.JobInsertMany(f.ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	wantExisting := []bool{false, false, true, true, false}
	for i, r := range res {
		if r.Existing != wantExisting[i] {
			t.Errorf("result %d existing = %v, want %v", i, r.Existing, wantExisting[i])
		}
		if !r.Existing && string(r.Job.Args) != string(ps[i].Args) {
			t.Errorf("result %d args = %s, want %s as given", i, r.Job.Args, ps[i].Args)
		}
		if !r.Existing {
			f.wantHistory(r.Job.ID, "enqueued")
		}
	}
	if res[2].Job.ID != res[0].Job.ID || res[3].Job.ID != pre.ID {
		t.Errorf("existing jobs %d, %d; want %d, %d", res[2].Job.ID, res[3].Job.ID, res[0].Job.ID, pre.ID)
	}
	if !(res[0].Job.ID < res[1].Job.ID && res[1].Job.ID < res[4].Job.ID) {
		t.Errorf("ids %d, %d, %d do not ascend in input order", res[0].Job.ID, res[1].Job.ID, res[4].Job.ID)
	}
}

// TestBatchUpdateFailureWritesNothing: the claim's and the batched
// transitions' UPDATEs are OR FAIL (no statement journal), so a statement that
// fails partway keeps the rows it already wrote until the transaction rolls
// back. A trigger that refuses the last job of each batch
// checks that the caller does roll back: no job of the batch moves, and no
// event is logged.
func TestBatchUpdateFailureWritesNothing(t *testing.T) {
	f := newFixture(t)
	var jobs []*driver.Job
	for range 6 {
		jobs = append(jobs, f.enqueue(nil))
	}
	last := jobs[len(jobs)-1].ID
	refuse := func(to string) {
		t.Helper()
		if _, err := f.d.DB().ExecContext(f.ctx, `DROP TRIGGER IF EXISTS test_refuse`); err != nil {
			t.Fatal(err)
		}
		if _, err := f.d.DB().ExecContext(f.ctx, fmt.Sprintf(`CREATE TRIGGER test_refuse BEFORE UPDATE OF status ON drover_jobs
			WHEN NEW.id = %d AND NEW.status = '%s' BEGIN SELECT RAISE(FAIL, 'test refuses job %d'); END`, last, to, last)); err != nil {
			t.Fatal(err)
		}
	}
	unchanged := func(what string) {
		t.Helper()
		for _, j := range jobs {
			got, err := f.d.JobGet(f.ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, j) {
				t.Errorf("after the refused %s, job %d = %+v, want it unchanged: %+v", what, j.ID, got, j)
			}
		}
	}
	refuse("running")
	if got, err := f.d.JobClaim(f.ctx, driver.ClaimParams{Queues: []string{"default"}, Limit: 10, Owner: "w1",
		LeaseDuration: time.Minute, Start: true, Now: f.at(0)}); err == nil || !strings.Contains(err.Error(), "test refuses") {
		t.Fatalf("claim = %d jobs, %v; want the trigger's error", len(got), err)
	}
	unchanged("claim")
	for _, j := range jobs {
		f.wantHistory(j.ID, "enqueued")
	}

	if _, err := f.d.DB().ExecContext(f.ctx, `DROP TRIGGER test_refuse`); err != nil {
		t.Fatal(err)
	}
	jobs = f.claim(driver.ClaimParams{Limit: 10, Start: true})
	if len(jobs) != 6 {
		t.Fatalf("claimed %d jobs, want 6", len(jobs))
	}
	for i, j := range jobs { // the claim's answer lacks nothing JobGet reads
		if jobs[i], _ = f.d.JobGet(f.ctx, j.ID); jobs[i] == nil {
			t.Fatalf("job %d is gone", j.ID)
		}
	}
	refuse("succeeded")
	ps := make([]driver.CompleteParams, len(jobs))
	for i, j := range jobs {
		ps[i] = driver.CompleteParams{FenceParams: fp(j, f.at(time.Second)), Result: json.RawMessage(`1`)}
	}
	for i, err := range f.d.JobCompleteManyErrs(f.ctx, ps) {
		if err == nil || !strings.Contains(err.Error(), "test refuses") {
			t.Errorf("completion %d (job %d): %v, want the trigger's error", i, jobs[i].ID, err)
		}
	}
	unchanged("completion")
	for _, j := range jobs {
		f.wantHistory(j.ID, "enqueued", "claimed", "started")
	}
}

// TestBatchRollbackTakesBackInTxRefusals: a job named twice in a batch is
// refused (lease lost) at its second mention because its first mention
// completed it, in the batch's transaction. When a later job then fails the
// transaction, that completion is rolled back, and the refusal it caused is no
// longer the truth: the job is still running under the very lease the second
// mention named. Its outcome must carry the batch's error, as every outcome
// not refused before the transaction does (as pgdriver's batch answers), not
// ErrLeaseLost, which tells the worker its lease is gone when it is not.
func TestBatchRollbackTakesBackInTxRefusals(t *testing.T) {
	f := newFixture(t)
	a, b := f.running(nil), f.running(nil)
	if _, err := f.d.DB().ExecContext(f.ctx, fmt.Sprintf(`CREATE TRIGGER test_refuse BEFORE UPDATE OF status ON drover_jobs
		WHEN NEW.id = %d AND NEW.status = 'succeeded' BEGIN SELECT RAISE(ABORT, 'test refuses job %d'); END`, b.ID, b.ID)); err != nil {
		t.Fatal(err)
	}
	now := f.at(2 * time.Second)
	cp := func(j *driver.Job) driver.CompleteParams {
		return driver.CompleteParams{FenceParams: fp(j, now), Result: json.RawMessage(`1`)}
	}
	staleB := cp(b)
	staleB.LeaseToken = "00000000-0000-4000-8000-000000000000"
	for _, call := range []struct {
		name string
		errs func([]driver.CompleteParams) []error
	}{
		{"JobCompleteMany", func(ps []driver.CompleteParams) []error {
			return driver.OutcomeErrs(f.d.JobCompleteMany(f.ctx, ps))
		}},
		{"JobCompleteManyErrs", func(ps []driver.CompleteParams) []error { return f.d.JobCompleteManyErrs(f.ctx, ps) }},
	} {
		// a first, a again (refused in the transaction: a is succeeded there),
		// b with a stale token (the set leaves it), then b itself, which the
		// trigger refuses on the one-at-a-time path: the transaction is lost.
		errs := call.errs([]driver.CompleteParams{cp(a), cp(a), staleB, cp(b)})
		for i, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "test refuses") {
				t.Errorf("%s: outcome %d = %v, want the batch's error (its transaction rolled back)", call.name, i, err)
			}
		}
		got, err := f.d.JobGet(f.ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != lifecycle.StatusRunning || got.LeaseToken != a.LeaseToken {
			t.Fatalf("%s: job %d is %s, want still running under its lease", call.name, a.ID, got.Status)
		}
	}
	// The refusal was false: the lease holder's completion goes through.
	if _, err := f.d.JobComplete(f.ctx, cp(a)); err != nil {
		t.Fatalf("JobComplete of job %d under the lease the batch called lost: %v", a.ID, err)
	}
}
