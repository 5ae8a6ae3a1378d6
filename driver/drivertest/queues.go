package drivertest

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// queueTests cover pausing, QueueList counts and QueuesReady.
var queueTests = []suiteTest{
	{"PauseResume", testPauseResume},
	{"ListCounts", testQueueList},
	{"ReadyAcrossPriorities", testQueuesReadyAcrossPriorities},
	{"ClaimOfSeveralQueuesPassesAPausedBacklog", testClaimPassesPausedBacklog},
}

func (h *harness) queue(name string) (driver.QueueInfo, bool) {
	h.t.Helper()
	qs, err := h.d.QueueList(h.ctx)
	if err != nil {
		h.t.Fatalf("QueueList: %v", err)
	}
	for _, q := range qs {
		if q.Name == name {
			return q, true
		}
	}
	return driver.QueueInfo{}, false
}

func testPauseResume(h *harness) {
	j := h.mustEnqueue(func(p *driver.InsertParams) { p.Queue = "mail" })
	h.mustEnqueue(func(p *driver.InsertParams) { p.Queue = "other" })
	if err := h.d.QueuePause(h.ctx, "mail"); err != nil {
		h.t.Fatalf("QueuePause: %v", err)
	}
	if q, ok := h.queue("mail"); !ok || !q.Paused {
		h.t.Errorf("QueueList after pause: mail = %+v (found %v), want paused", q, ok)
	}
	p := h.claimParams(0)
	p.Queues, p.Limit = []string{"mail"}, 10
	h.mustClaimNone(p)
	p.ID = j.ID
	h.mustClaimNone(p)
	p.ID = 0
	if got := h.get(j.ID).Status; got != lifecycle.StatusQueued {
		h.t.Errorf("job in a paused queue is %s, want queued (pausing a queue leaves its jobs alone)", got)
	}
	ready, err := h.d.QueuesReady(h.ctx, h.at(0))
	if err != nil || slices.Contains(ready, "mail") || !slices.Contains(ready, "other") {
		h.t.Errorf("QueuesReady with mail paused = %v, %v; want other and not mail", ready, err)
	}
	// Pausing twice is fine; other queues are not affected.
	if err := h.d.QueuePause(h.ctx, "mail"); err != nil {
		h.t.Errorf("QueuePause of a paused queue: %v", err)
	}
	o := h.claimParams(0)
	o.Queues = []string{"other"}
	h.mustClaimOne(o)
	if err := h.d.QueueResume(h.ctx, "mail"); err != nil {
		h.t.Fatalf("QueueResume: %v", err)
	}
	if q, ok := h.queue("mail"); !ok || q.Paused {
		h.t.Errorf("QueueList after resume: mail = %+v (found %v), want not paused", q, ok)
	}
	if c := h.mustClaimOne(p); c.ID != j.ID {
		h.t.Errorf("claim after resume took %d, want %d", c.ID, j.ID)
	}
	// A queue with no jobs can be paused and is listed.
	if err := h.d.QueuePause(h.ctx, "empty"); err != nil {
		h.t.Fatalf("QueuePause(empty): %v", err)
	}
	if q, ok := h.queue("empty"); !ok || !q.Paused {
		h.t.Errorf("QueueList: paused queue without jobs = %+v (found %v), want it listed as paused", q, ok)
	}
}

func testQueueList(h *harness) {
	inQ := func(q string) func(p *driver.InsertParams) { return func(p *driver.InsertParams) { p.Queue = q } }
	h.mustEnqueue(inQ("a"))
	h.mustEnqueue(inQ("a"))
	h.claimedJob(inQ("a"))
	r := h.runningJob(inQ("b"))
	h.mustComplete(r, 2*time.Second, nil)
	h.runningJob(inQ("b"))
	x := h.mustEnqueue(inQ("b"))
	h.mustCancel(x.ID, time.Second)
	want := map[string]map[lifecycle.Status]int{
		"a": {lifecycle.StatusQueued: 2, lifecycle.StatusClaimed: 1},
		"b": {lifecycle.StatusSucceeded: 1, lifecycle.StatusRunning: 1, lifecycle.StatusCanceled: 1},
	}
	qs, err := h.d.QueueList(h.ctx)
	if err != nil {
		h.t.Fatalf("QueueList: %v", err)
	}
	got := map[string]map[lifecycle.Status]int{}
	for _, q := range qs {
		if q.Paused {
			h.t.Errorf("queue %s is paused, want not", q.Name)
		}
		m := map[lifecycle.Status]int{}
		for s, n := range q.Counts {
			if n != 0 {
				m[s] = n
			}
		}
		got[q.Name] = m
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			h.t.Errorf("QueueList has no queue %q, want counts %v", name, w)
			continue
		}
		if !mapsEqual(g, w) {
			h.t.Errorf("QueueList %q counts = %v, want %v", name, g, w)
		}
	}
	if len(got) != len(want) {
		h.t.Errorf("QueueList = %v, want exactly the queues %v", got, want)
	}
}

func mapsEqual(a, b map[lifecycle.Status]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A queue is ready when any of its priorities has a job due, also when its
// first job in claim order waits in the future; queues with only future jobs
// are not.
func testQueuesReadyAcrossPriorities(h *harness) {
	at := func(q string, prio int, d time.Duration) func(p *driver.InsertParams) {
		return func(p *driver.InsertParams) {
			runAt := h.tm(d)
			p.Queue, p.Priority, p.RunAt = q, prio, &runAt
		}
	}
	h.mustEnqueue(at("a", 0, time.Hour))   // first in a's claim order, not due
	h.mustEnqueue(at("a", 2, 0))           // due
	h.mustEnqueue(at("b", 1, time.Hour))   // b: only future jobs
	h.mustEnqueue(at("c", 0, time.Minute)) // c: due at one minute
	h.mustEnqueue(at("c", 0, 0))
	ready, err := h.d.QueuesReady(h.ctx, h.at(time.Second))
	if err != nil || !slices.Equal(ready, []string{"a", "c"}) {
		h.t.Errorf("QueuesReady = %v, %v; want [a c]", ready, err)
	}
	ready, err = h.d.QueuesReady(h.ctx, h.at(time.Hour))
	if err != nil || !slices.Equal(ready, []string{"a", "b", "c"}) {
		h.t.Errorf("QueuesReady an hour later = %v, %v; want [a b c]", ready, err)
	}
}

// testClaimPassesPausedBacklog: a claim naming several queues takes the jobs
// of those not paused, however many jobs of a paused one come first in claim
// order. A claim whose candidates include a paused queue's jobs, refused only
// when they are claimed by id, asks again past them a bounded number of times
// (pgdriver's claimRounds): a worker serving a paused queue with a backlog
// beside another queue would claim nothing while the other queue's jobs wait.
func testClaimPassesPausedBacklog(h *harness) {
	for i := range 10 {
		h.mustEnqueue(func(p *driver.InsertParams) {
			p.Queue, p.Priority = "held", 0
			p.Args = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		})
	}
	open := h.mustEnqueue(func(p *driver.InsertParams) { p.Queue, p.Priority = "open", 5 })
	if err := h.d.QueuePause(h.ctx, "held"); err != nil {
		h.t.Fatalf("QueuePause(held): %v", err)
	}
	p := h.claimParams(0)
	p.Queues, p.Limit = []string{"held", "open"}, 1
	jobs := h.mustClaimN(p)
	if len(jobs) != 1 || jobs[0].ID != open.ID {
		h.t.Errorf("JobClaim(held paused with 10 jobs of priority 0, open with job %d of priority 5, limit 1) = %v; want [%d]",
			open.ID, jobIDs(jobs), open.ID)
	}
}
