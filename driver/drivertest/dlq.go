package drivertest

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// dlqTests: the dead-letter queue is the set of failed jobs.
var dlqTests = []suiteTest{
	{"Requeue", testDLQRequeue},
	{"RequeueNotFailed", testDLQRequeueNotFailed},
	{"RequeueOnce", testDLQRequeueOnce},
	{"RequeueConcurrent", testDLQRequeueConcurrent},
	{"Purge", testDLQPurge},
}

// failedJob runs a job to failed through a permanent failure.
func (h *harness) failedJob(edit func(p *driver.InsertParams)) *driver.Job {
	h.t.Helper()
	r := h.runningJob(edit)
	return h.mustFail(r, failParams(h.at(2*time.Second), "boom", h.tm(time.Hour), true), lifecycle.StatusFailed)
}

func testDLQRequeue(h *harness) {
	f := h.failedJob(func(p *driver.InsertParams) {
		p.Kind, p.Queue, p.Priority, p.MaxAttempts, p.Timeout = "report.build", "reports", 3, 4, 90*time.Second
		p.Args = json.RawMessage(`{"month":"2024-05","ids":[3,1,2]}`)
		p.Metadata = json.RawMessage(`{"tenant":"acme"}`)
	})
	before := h.snap(f.ID)
	n, err := h.d.JobDLQRequeue(h.ctx, driver.DLQRequeueParams{ID: f.ID, Actor: "operator"})
	if err != nil {
		h.t.Fatalf("JobDLQRequeue(%d): %v", f.ID, err)
	}
	h.checkJob(n, "JobDLQRequeue")
	if n.ID == f.ID || n.Status != lifecycle.StatusQueued || n.RetryOf == nil || *n.RetryOf != f.ID {
		h.t.Errorf("requeued job: id %d status %s retry_of %s; want a new queued job with retry_of %d", n.ID, n.Status, fmtInt64Ptr(n.RetryOf), f.ID)
	}
	if n.Kind != f.Kind || n.Queue != f.Queue || n.Priority != f.Priority || n.MaxAttempts != f.MaxAttempts ||
		n.Timeout != f.Timeout || !jsonEqual(n.Args, f.Args) || !jsonEqual(n.Metadata, f.Metadata) {
		h.t.Errorf("requeued job does not copy the failed one:\n got  %v\n from %v", jobFields(n), jobFields(f))
	}
	if n.Attempt != 0 || n.Executions != 0 || len(n.Errors) != 0 || n.Error != "" || n.IdempotencyKey != "" {
		h.t.Errorf("requeued job starts with attempt %d executions %d errors %d error %q key %q; want a fresh job",
			n.Attempt, n.Executions, len(n.Errors), n.Error, n.IdempotencyKey)
	}
	h.wantLastEvent(n, lifecycle.EventEnqueued, "", 1)
	h.wantUnchanged(before, "JobDLQRequeue (the failed row stays as the record)")
	c := h.mustClaimOne(driver.ClaimParams{Queues: []string{"reports"}, Limit: 1, Owner: owner, LeaseDuration: leaseDuration})
	if c.ID != n.ID {
		h.t.Errorf("claim from reports took %d, want the requeued job %d", c.ID, n.ID)
	}
}

// testDLQRequeueOnce: a failed job is requeued at most once. A repeat, while
// the new job waits and after it has run, returns that job (Replayed) and
// writes nothing; the new job, once failed, can be requeued in turn.
func testDLQRequeueOnce(h *harness) {
	f := h.failedJob(func(p *driver.InsertParams) { p.Queue = "once" })
	first, err := h.d.JobDLQRequeue(h.ctx, driver.DLQRequeueParams{ID: f.ID, Actor: "operator"})
	if err != nil {
		h.t.Fatalf("JobDLQRequeue(%d): %v", f.ID, err)
	}
	if first.Replayed {
		h.t.Errorf("first JobDLQRequeue(%d): Replayed = true, want false", f.ID)
	}
	again := func(what string) *driver.Job {
		h.t.Helper()
		before := h.snap(first.ID)
		j, err := h.d.JobDLQRequeue(h.ctx, driver.DLQRequeueParams{ID: f.ID, Actor: "operator-2"})
		if err != nil {
			h.t.Fatalf("JobDLQRequeue(%d) %s: %v", f.ID, what, err)
		}
		if j.ID != first.ID || !j.Replayed || *j.RetryOf != f.ID {
			h.t.Errorf("JobDLQRequeue(%d) %s = job %d (Replayed %v), want job %d again, Replayed", f.ID, what, j.ID, j.Replayed, first.ID)
		}
		h.wantUnchanged(before, "JobDLQRequeue "+what)
		if all := h.listAll(driver.ListParams{Queue: "once", Limit: 100}); len(all) != 2 {
			h.t.Errorf("queue holds %d jobs %v after the requeue %s, want 2 (the failed one and its requeue)", len(all), jobIDs(all), what)
		}
		return j
	}
	if j := again("while its job waits"); j.Status != lifecycle.StatusQueued {
		h.t.Errorf("repeat while waiting: status %s, want queued", j.Status)
	}
	c := h.mustClaimOne(driver.ClaimParams{Queues: []string{"once"}, Limit: 1, Owner: owner, LeaseDuration: leaseDuration})
	if c.ID != first.ID {
		h.t.Fatalf("claim took %d, want the requeued job %d", c.ID, first.ID)
	}
	failed := h.mustFail(h.mustStart(c, 2*time.Second), failParams(h.at(3*time.Second), "boom again", h.tm(time.Hour), true), lifecycle.StatusFailed)
	if j := again("after its job failed too"); j.Status != lifecycle.StatusFailed || j.Rev != failed.Rev {
		h.t.Errorf("repeat after the requeued job failed: status %s rev %d, want it as it is now (failed, rev %d)", j.Status, j.Rev, failed.Rev)
	}
	second, err := h.d.JobDLQRequeue(h.ctx, driver.DLQRequeueParams{ID: first.ID, Actor: "operator"})
	if err != nil {
		h.t.Fatalf("JobDLQRequeue of the requeued job %d, failed in turn: %v", first.ID, err)
	}
	if second.Replayed || second.ID == first.ID || second.ID == f.ID || *second.RetryOf != first.ID {
		h.t.Errorf("requeue of the failed requeue = job %d (Replayed %v, retry_of %s), want a new job retrying %d",
			second.ID, second.Replayed, fmtInt64Ptr(second.RetryOf), first.ID)
	}
}

// testDLQRequeueConcurrent: requeues of one failed job racing each other
// create one job, which every one of them returns. Several rounds, because a
// race lost without the driver's lock shows in only some of them.
func testDLQRequeueConcurrent(h *harness) {
	const rounds, n = 8, 16
	for r := range rounds {
		queue := fmt.Sprintf("race-%d", r)
		f := h.failedJob(func(p *driver.InsertParams) { p.Queue = queue })
		jobs := make([]*driver.Job, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				jobs[i], errs[i] = h.d.JobDLQRequeue(h.ctx, driver.DLQRequeueParams{ID: f.ID, Actor: "operator"})
			}()
		}
		close(start)
		wg.Wait()
		fresh, ids := 0, map[int64]bool{}
		for i := range n {
			if errs[i] != nil {
				h.t.Errorf("round %d, requeue %d: %v", r, i, errs[i])
				continue
			}
			ids[jobs[i].ID] = true
			if !jobs[i].Replayed {
				fresh++
			}
		}
		if fresh != 1 || len(ids) != 1 {
			h.t.Errorf("round %d: %d of %d concurrent requeues created a job, and they returned %d jobs; want 1 and 1", r, fresh, n, len(ids))
		}
		if all := h.listAll(driver.ListParams{Queue: queue, Limit: 100}); len(all) != 2 {
			h.t.Errorf("round %d: queue holds %d jobs %v, want 2 (the failed one and one requeue)", r, len(all), jobIDs(all))
		}
	}
}

func testDLQRequeueNotFailed(h *harness) {
	q := h.mustEnqueue(nil)
	r := h.runningJob(nil)
	s := h.runningJob(nil)
	h.mustComplete(s, 2*time.Second, nil)
	x := h.mustEnqueue(nil)
	h.mustCancel(x.ID, time.Second)
	for _, id := range []int64{q.ID, r.ID, s.ID, x.ID} {
		h.rejected(id, driver.ErrInvalidTransition, "JobDLQRequeue of a job that is not failed", func() error {
			_, err := h.d.JobDLQRequeue(h.ctx, driver.DLQRequeueParams{ID: id, Actor: "operator"})
			return err
		})
	}
	if all := h.listAll(driver.ListParams{Limit: 100}); len(all) != 4 {
		h.t.Errorf("database holds %d jobs after refused requeues, want 4", len(all))
	}
}

func testDLQPurge(h *harness) {
	f1 := h.failedJob(func(p *driver.InsertParams) { p.Queue = "q1" })
	f2 := h.failedJob(func(p *driver.InsertParams) { p.Queue = "q2" })
	f3 := h.failedJob(func(p *driver.InsertParams) { p.Queue = "q2" })
	keep := []*driver.Job{h.mustEnqueue(func(p *driver.InsertParams) { p.Queue = "q1" }), h.runningJob(func(p *driver.InsertParams) { p.Queue = "q2" })}
	s := h.runningJob(func(p *driver.InsertParams) { p.Queue = "q1" })
	keep = append(keep, h.mustComplete(s, 2*time.Second, nil))
	var snaps []snapshot
	for _, k := range keep {
		snaps = append(snaps, h.snap(k.ID))
	}
	n, err := h.d.JobDLQPurge(h.ctx, driver.DLQPurgeParams{Queue: "q1"})
	if err != nil || n != 1 {
		h.t.Errorf("JobDLQPurge(q1) = %d, %v; want 1", n, err)
	}
	h.wantGone(f1.ID)
	h.get(f2.ID)
	n, err = h.d.JobDLQPurge(h.ctx, driver.DLQPurgeParams{})
	if err != nil || n != 2 {
		h.t.Errorf("JobDLQPurge(all) = %d, %v; want 2", n, err)
	}
	h.wantGone(f2.ID)
	h.wantGone(f3.ID)
	for _, s := range snaps {
		h.wantUnchanged(s, "JobDLQPurge")
	}
	if n, err := h.d.JobDLQPurge(h.ctx, driver.DLQPurgeParams{}); err != nil || n != 0 {
		h.t.Errorf("JobDLQPurge of an empty DLQ = %d, %v; want 0", n, err)
	}
}

// wantGone asserts job id and its events were deleted.
func (h *harness) wantGone(id int64) {
	h.t.Helper()
	_, err := h.d.JobGet(h.ctx, id)
	h.wantErr(err, driver.ErrNotFound, "JobGet of a deleted job")
	evs, err := h.d.JobEvents(h.ctx, id)
	if err == nil && len(evs) != 0 {
		h.t.Errorf("deleted job %d still has events %s", id, fmtEvents(evs))
	}
}
