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
	{"WorkerClaimEvents", testWorkerClaimEvents},
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

// testWorkerClaimEvents: a worker's claim (one that starts its jobs, without a
// request_id) logs claimed and started, which a driver may keep outside its
// events table while the claim lasts (both keep them in the job row). However
// the claim ends (a retry, a snooze, a reap, a completion with or without a
// request_id, a cancel, a permanent failure) the log shows each of them once,
// in order, at the claim's time, by its worker, at its attempt.
func testWorkerClaimEvents(h *harness) {
	claimedAt := map[int64]map[int]time.Time{} // job → attempt → when its claim ran
	start := func(id int64, now time.Duration) *driver.Job {
		h.t.Helper()
		jobs, err := h.d.JobClaim(h.ctx, driver.ClaimParams{Queues: []string{defaultQueue}, ID: id, Limit: 1, Owner: owner,
			LeaseDuration: leaseDuration, Now: h.at(now), Start: true})
		if err != nil || len(jobs) != 1 || jobs[0].Status != lifecycle.StatusRunning {
			h.t.Fatalf("starting claim of job %d: %v, %v; want it running", id, jobIDs(jobs), err)
		}
		if claimedAt[id] == nil {
			claimedAt[id] = map[int]time.Time{}
		}
		claimedAt[id][jobs[0].Attempt] = h.tm(now)
		return jobs[0]
	}
	E := lifecycle.EventEnqueued
	C, S := lifecycle.EventClaimed, lifecycle.EventStarted
	want := map[int64][]lifecycle.EventType{}

	a := h.mustEnqueue(nil).ID
	r := start(a, time.Second)
	h.mustFail(r, failParams(h.at(2*time.Second), "boom", h.tm(3*time.Second), false), lifecycle.StatusQueued)
	r = start(a, 3*time.Second)
	h.mustSnooze(r, 4*time.Second, h.tm(5*time.Second))
	r = start(a, 5*time.Second)
	h.mustHeartbeat(r, 6*time.Second) // leased until t0+36s
	h.reapOne(a, 40*time.Second)
	r = start(a, 41*time.Second)
	done, err := h.d.JobComplete(h.ctx, driver.CompleteParams{FenceParams: driver.FenceParams{ID: r.ID, Attempt: r.Attempt,
		LeaseToken: r.LeaseToken, Now: h.at(42 * time.Second), RequestID: "done-1"}})
	if err != nil || done.Status != lifecycle.StatusSucceeded {
		h.t.Fatalf("completion with a request_id: %v, %v", done, err)
	}
	want[a] = []lifecycle.EventType{E, C, S, lifecycle.EventRetried, C, S, lifecycle.EventSnoozed, C, S,
		lifecycle.EventStalled, lifecycle.EventRequeued, C, S, lifecycle.EventSucceeded}

	b := h.mustEnqueue(nil).ID
	start(b, time.Second)
	h.mustCancel(b, 2*time.Second)
	want[b] = []lifecycle.EventType{E, C, S, lifecycle.EventCanceled}

	c := h.mustEnqueue(nil).ID
	r = start(c, time.Second)
	h.mustFail(r, failParams(h.at(2*time.Second), "fatal", time.Time{}, true), lifecycle.StatusFailed)
	want[c] = []lifecycle.EventType{E, C, S, lifecycle.EventFailed}

	d := h.mustEnqueue(nil).ID
	r = start(d, time.Second)
	h.mustComplete(r, 2*time.Second, nil)
	want[d] = []lifecycle.EventType{E, C, S, lifecycle.EventSucceeded}

	e := h.mustEnqueue(nil).ID
	start(e, time.Second)
	want[e] = []lifecycle.EventType{E, C, S} // still running

	for _, id := range []int64{a, b, c, d, e} {
		evs := h.events(id)
		if len(evs) != len(want[id]) {
			h.t.Errorf("job %d: events %s, want %v", id, fmtEvents(evs), want[id])
			continue
		}
		for i, ev := range evs {
			if ev.Type != want[id][i] {
				h.t.Errorf("job %d: event %d = %s, want type %s", id, i, fmtEvent(ev), want[id][i])
			}
			if i > 0 && ev.Seq <= evs[i-1].Seq {
				h.t.Errorf("job %d: event %d seq %d does not grow from %d", id, i, ev.Seq, evs[i-1].Seq)
			}
			if ev.Type != C {
				continue
			}
			at, ok := claimedAt[id][ev.Attempt]
			if !ok || ev.From != lifecycle.StatusQueued || ev.To != lifecycle.StatusClaimed || !ev.At.Equal(at) ||
				ev.Actor != "worker:"+owner || ev.RequestID != "" {
				h.t.Errorf("job %d: claim event %s, want queued → claimed at %s by worker:%s, attempt of a claim", id, fmtEvent(ev), fmtTime(at), owner)
			}
			if i+1 < len(evs) {
				st := evs[i+1]
				if st.Type != S || st.Seq != ev.Seq+1 || !st.At.Equal(ev.At) || st.Actor != ev.Actor || st.Attempt != ev.Attempt ||
					st.From != lifecycle.StatusClaimed || st.To != lifecycle.StatusRunning {
					h.t.Errorf("job %d: event after the claim %s is %s, want its start at the next seq", id, fmtEvent(ev), fmtEvent(st))
				}
			}
		}
		if err := lifecycle.CheckHistory(evs); err != nil {
			h.t.Errorf("job %d: history is illegal: %v", id, err)
		}
	}
}
