package drivertest

import (
	"encoding/json"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// eventTests count events against the transitions performed.
var eventTests = []suiteTest{
	{"OnePerTransition", testOneEventPerTransition},
	{"EnqueuedActorPerJob", testEnqueuedActorPerJob},
}

// testEnqueuedActorPerJob: each job of a batch logs its enqueue under its own
// actor ("client" when none is given), not the batch's first.
func testEnqueuedActorPerJob(h *harness) {
	actors := []string{"api:a", "operator", ""}
	ps := make([]driver.InsertParams, len(actors))
	for i, a := range actors {
		ps[i] = h.params(func(p *driver.InsertParams) { p.Actor = a })
	}
	for i, r := range h.mustInsert(ps...) {
		want := actors[i]
		if want == "" {
			want = "client"
		}
		evs := h.events(r.Job.ID)
		if len(evs) == 0 || evs[0].Type != lifecycle.EventEnqueued || evs[0].Actor != want {
			h.t.Errorf("job %d of the batch: events %s, want it enqueued by %q", i, fmtEvents(evs), want)
		}
	}
}

func testOneEventPerTransition(h *harness) {
	j := h.mustEnqueue(nil) // 1 enqueued
	c := h.mustClaim(0)     // 2 claimed
	h.mustHeartbeat(c, time.Second)
	h.mustUnclaim(c, 2*time.Second)                                                                            // 3 unclaimed
	c = h.mustClaim(3 * time.Second)                                                                           // 4 claimed
	r := h.mustStart(c, 4*time.Second)                                                                         // 5 started
	h.mustHeartbeat(r, 5*time.Second)                                                                          // no event
	h.mustFail(r, failParams(h.at(6*time.Second), "boom", h.tm(7*time.Second), false), lifecycle.StatusQueued) // 6 retried
	c = h.mustClaim(7 * time.Second)                                                                           // 7 claimed
	r = h.mustStart(c, 8*time.Second)                                                                          // 8 started
	h.mustSnooze(r, 9*time.Second, h.tm(10*time.Second))                                                       // 9 snoozed
	c = h.mustClaim(10 * time.Second)                                                                          // 10 claimed
	h.reapOne(c.ID, 41*time.Second)                                                                            // 11 stalled, 12 requeued
	c = h.mustClaim(42 * time.Second)                                                                          // 13 claimed
	r = h.mustStart(c, 43*time.Second)                                                                         // 14 started
	h.mustComplete(r, 44*time.Second, json.RawMessage(`{"done":true}`))                                        // 15 succeeded

	evs := h.events(j.ID)
	want := []lifecycle.EventType{
		lifecycle.EventEnqueued, lifecycle.EventClaimed, lifecycle.EventUnclaimed, lifecycle.EventClaimed,
		lifecycle.EventStarted, lifecycle.EventRetried, lifecycle.EventClaimed, lifecycle.EventStarted,
		lifecycle.EventSnoozed, lifecycle.EventClaimed, lifecycle.EventStalled, lifecycle.EventRequeued,
		lifecycle.EventClaimed, lifecycle.EventStarted, lifecycle.EventSucceeded,
	}
	if len(evs) != len(want) {
		h.t.Fatalf("events = %s, want %d: %v", fmtEvents(evs), len(want), want)
	}
	for i, e := range evs {
		if e.Type != want[i] {
			h.t.Errorf("event %d = %s, want type %s", i, fmtEvent(e), want[i])
		}
		if i > 0 && e.Seq <= evs[i-1].Seq {
			h.t.Errorf("event %d seq %d does not grow from %d", i, e.Seq, evs[i-1].Seq)
		}
		if e.JobID != j.ID || e.At.IsZero() || e.At.Location() != time.UTC {
			h.t.Errorf("event %d = %+v: want job_id %d and a UTC time", i, e, j.ID)
		}
	}
	if err := lifecycle.CheckHistory(evs); err != nil {
		h.t.Errorf("history is illegal: %v", err)
	}
	final := h.get(j.ID)
	if final.Attempt != 5 || final.Executions != 2 {
		// Executions: start (1), retry keeps it, start (2), snooze gives back (1), reap of a claim keeps it, start (2).
		h.t.Errorf("final attempt %d executions %d, want 5 and 2", final.Attempt, final.Executions)
	}
	// Event times follow Now.
	if at := evs[len(evs)-1].At; !at.Equal(h.tm(44 * time.Second)) {
		h.t.Errorf("succeeded event at %s, want Now %s", fmtTime(at), fmtTime(h.tm(44*time.Second)))
	}
}
