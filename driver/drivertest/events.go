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
	{"EachEventSaysWhoWhenAndAtWhichAttempt", testEventFields},
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

// testEventFields: every event of a job's log names the transition's time (the
// call's Now), its actor (the lease holder of the attempt as worker:<owner>,
// the engine for a reap, the caller's for a cancel), its attempt, its statuses
// and its request_id. OnePerTransition counts the types; an event logged under
// another actor or time tells an operator reading the log something false.
func testEventFields(h *harness) {
	type ev struct {
		typ      lifecycle.EventType
		from, to lifecycle.Status
		at       time.Duration
		actor    string
		attempt  int
		req      string
	}
	const w1, w2 = "worker:" + owner, "worker:worker-2"
	Q, C, R, S := lifecycle.StatusQueued, lifecycle.StatusClaimed, lifecycle.StatusRunning, lifecycle.StatusStalled
	j := h.mustEnqueue(nil)
	c := h.mustClaim(time.Second)
	if _, err := h.d.JobHeartbeat(h.ctx, driver.HeartbeatParams{FenceParams: driver.FenceParams{ID: c.ID, Attempt: c.Attempt,
		LeaseToken: c.LeaseToken, Now: h.at(2 * time.Second), RequestID: "hb-1", LeaseDuration: leaseDuration}}); err != nil {
		h.t.Fatalf("JobHeartbeat with a request_id: %v", err)
	}
	h.mustUnclaim(c, 3*time.Second)
	p := h.claimParams(4 * time.Second)
	p.Owner = "worker-2"
	c = h.mustClaimOne(p)
	r := h.mustStart(c, 5*time.Second)
	h.mustFail(r, failParams(h.at(6*time.Second), "boom", h.tm(7*time.Second), false), lifecycle.StatusQueued)
	r = h.mustStart(h.mustClaim(7*time.Second), 8*time.Second)
	h.mustSnooze(r, 9*time.Second, h.tm(10*time.Second))
	c = h.mustClaim(10 * time.Second) // leased until t0+40s
	h.reapOne(c.ID, 41*time.Second)
	r = h.mustStart(h.mustClaim(42*time.Second), 43*time.Second)
	if _, err := h.d.JobCancel(h.ctx, driver.CancelParams{ID: r.ID, Actor: "operator:alice", Now: h.at(44 * time.Second), RequestID: "cancel-1"}); err != nil {
		h.t.Fatalf("JobCancel: %v", err)
	}
	want := []ev{
		{lifecycle.EventEnqueued, "", Q, -1, "drivertest", 0, ""}, // at: the database's clock
		{lifecycle.EventClaimed, Q, C, time.Second, w1, 1, ""},
		{lifecycle.EventHeartbeat, C, C, 2 * time.Second, w1, 1, "hb-1"},
		{lifecycle.EventUnclaimed, C, Q, 3 * time.Second, w1, 1, ""},
		{lifecycle.EventClaimed, Q, C, 4 * time.Second, w2, 2, ""},
		{lifecycle.EventStarted, C, R, 5 * time.Second, w2, 2, ""},
		{lifecycle.EventRetried, R, Q, 6 * time.Second, w2, 2, ""},
		{lifecycle.EventClaimed, Q, C, 7 * time.Second, w1, 3, ""},
		{lifecycle.EventStarted, C, R, 8 * time.Second, w1, 3, ""},
		{lifecycle.EventSnoozed, R, Q, 9 * time.Second, w1, 3, ""},
		{lifecycle.EventClaimed, Q, C, 10 * time.Second, w1, 4, ""},
		{lifecycle.EventStalled, C, S, 41 * time.Second, "engine", 4, ""},
		{lifecycle.EventRequeued, S, Q, 41 * time.Second, "engine", 4, ""},
		{lifecycle.EventClaimed, Q, C, 42 * time.Second, w1, 5, ""},
		{lifecycle.EventStarted, C, R, 43 * time.Second, w1, 5, ""},
		{lifecycle.EventCanceled, R, lifecycle.StatusCanceled, 44 * time.Second, "operator:alice", 5, "cancel-1"},
	}
	evs := h.events(j.ID)
	if len(evs) != len(want) {
		h.t.Fatalf("events = %s, want %d", fmtEvents(evs), len(want))
	}
	for i, e := range evs {
		w := want[i]
		if e.Type != w.typ || e.From != w.from || e.To != w.to || e.Actor != w.actor || e.Attempt != w.attempt ||
			e.RequestID != w.req || (w.at >= 0 && !e.At.Equal(h.tm(w.at))) {
			at := "any time"
			if w.at >= 0 {
				at = fmtTime(h.tm(w.at))
			}
			h.t.Errorf("event %d = %s at %s by %q; want %s %s→%s at %s by %q, attempt %d, request_id %q",
				i, fmtEvent(e), fmtTime(e.At), e.Actor, w.typ, w.from, w.to, at, w.actor, w.attempt, w.req)
		}
	}
}
