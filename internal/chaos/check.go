package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// history is everything the checker reads after the drain: the database's jobs,
// events and effect log, the enqueuer's ledger, the workers' reports and the
// fault log. The checker is a pure function of it (Jepsen's model: what went in
// must have come out, once).
type history struct {
	Jobs    []*driver.Job
	Events  map[int64][]lifecycle.Event
	Effects []effect
	Acks    []ack // "ok" lines: a worker's belief that it completed a job
	Ended   []ack // "ended" lines: a long KindWork handler returned (At: when read)

	Acked     map[int64]int64 // seq → job id of every acknowledged enqueue
	Attempted map[int64]bool  // every seq ever sent (acknowledged or not)
	Probes    map[int64]bool  // job ids of bad-input probes (checked on their own)
	FarFuture map[int64]bool  // job ids expected to stay queued
	// Cancels: job ids the harness asked to cancel; true when the call
	// answered that the job is canceled (it must end so, and run no more).
	Cancels map[int64]bool

	Faults []fault
	Lease  time.Duration
}

// effect is one row of the effect log: one execution of a KindWork handler.
type effect struct {
	Seq     int64
	JobID   int64
	Attempt int
	Worker  string
	Held    bool // the execution held the lease when it wrote the effect
	At      time.Time
}

type ack struct {
	JobID   int64
	Attempt int
	Worker  string
	At      time.Time
}

// fault is one injected fault and the incarnations it could have cut off.
type fault struct {
	Kind       string // kill, pause, db_restart, terminate, leader_kill
	Targets    []string
	All        bool // affects every process (database restart)
	Start, End time.Time
}

func (f fault) affects(worker string) bool {
	if f.All {
		return true
	}
	for _, t := range f.Targets {
		if t == worker {
			return true
		}
	}
	return false
}

// verdict holds the checks' counts; every field but the informational ones must be zero.
type verdict struct {
	Lost             int // acknowledged enqueue whose job is missing or not terminal
	Failed           int // acknowledged KindWork job that ended other than succeeded
	Unexpected       int // job in the database that no enqueue (nor probe) accounts for
	Stuck            int // non-terminal after the drain (far-future probes excepted)
	DupCompletions   int // more than one attempt completed (events or the workers' acks)
	FalseAcks        int // a worker reported success for a job that did not succeed
	LeaseOverlaps    int // a new attempt claimed while the previous one's lease was open
	EarlyStalls      int // an attempt stalled (reaped) before its lease, at least Lease from its claim, ran out
	RanAfterCancel   int // an acknowledged cancel that did not end the job or its running handler
	IllegalHistories int // CheckHistory or CheckInvariants failed
	AttemptsOverMax  int // executions above max_attempts
	MissingEffects   int // a KindWork job succeeded with no execution recorded
	DupEffects       int // effect rows beyond one per job (allowed: at-least-once)
	DupViolations    int // duplicate effects no kill, pause or database fault explains
	Unleased         int // effects written without the lease (informational)
	Indeterminate    int // enqueues never acknowledged (retried to the end)
	Examples         []string
}

func (v *verdict) example(format string, a ...any) {
	if len(v.Examples) < 20 {
		v.Examples = append(v.Examples, fmt.Sprintf(format, a...))
	}
}

// check computes the verdict of h.
func check(h *history) verdict {
	var v verdict
	overMax := map[int64]bool{}
	byID := make(map[int64]*driver.Job, len(h.Jobs))
	for _, j := range h.Jobs {
		byID[j.ID] = j
	}
	ledgerIDs := make(map[int64]int64, len(h.Acked))
	for seq, id := range h.Acked {
		ledgerIDs[id] = seq
		j := byID[id]
		switch {
		case j == nil:
			v.Lost++
			v.example("lost: seq %d acknowledged as job %d, which is not in the database", seq, id)
		case !j.Status.Terminal():
			v.Lost++
			v.example("lost: seq %d (job %d) is %s after the drain", seq, id, j.Status)
		case j.Status == lifecycle.StatusCanceled && cancelSent(h, id):
			// the harness canceled it
		case j.Status != lifecycle.StatusSucceeded:
			v.Failed++
			v.example("failed: seq %d (job %d) ended %s: %s", seq, id, j.Status, j.Error)
		}
		if j != nil && seqOf(j) != seq {
			v.Unexpected++
			v.example("job %d has seq %d, the ledger says %d", id, seqOf(j), seq)
		}
	}
	for seq := range h.Attempted {
		if _, ok := h.Acked[seq]; !ok {
			v.Indeterminate++
		}
	}
	// Every enqueue of a seq, its retries included, names the seq's
	// idempotency key, so a seq has one job at most, acknowledged or not:
	// a seq never acknowledged was exempt below, however many jobs it had.
	perSeq := map[int64][]int64{}
	for _, j := range h.Jobs {
		if s := seqOf(j); s >= 0 {
			perSeq[s] = append(perSeq[s], j.ID)
		}
	}
	for s, ids := range perSeq {
		if len(ids) > 1 {
			v.Unexpected += len(ids) - 1
			v.example("seq %d, one idempotency key, has %d jobs %v", s, len(ids), ids)
		}
	}
	for _, j := range h.Jobs {
		_, inLedger := ledgerIDs[j.ID]
		if !inLedger && !h.Probes[j.ID] {
			if s := seqOf(j); s < 0 || !h.Attempted[s] || h.Acked[s] != 0 {
				v.Unexpected++
				v.example("unexpected: job %d (%s, seq %d) was never enqueued by the harness", j.ID, j.Kind, s)
			}
		}
		if !j.Status.Terminal() && !h.FarFuture[j.ID] {
			v.Stuck++
			v.example("stuck: job %d (%s) is %s after the drain", j.ID, j.Kind, j.Status)
		}
		if err := lifecycle.CheckInvariants(j.State()); err != nil {
			v.IllegalHistories++
			v.example("job %d breaks invariants: %v", j.ID, err)
		} else if err := lifecycle.CheckHistory(h.Events[j.ID]); err != nil {
			v.IllegalHistories++
			v.example("job %d history: %v", j.ID, err)
		} else if evs := h.Events[j.ID]; evs[len(evs)-1].To != j.Status || evs[len(evs)-1].Attempt != j.Attempt {
			// A legal prefix is not the history: a dropped last event leaves one.
			last := evs[len(evs)-1]
			v.IllegalHistories++
			v.example("job %d history ends %s at attempt %d (seq %d, %s), but the job is %s at attempt %d",
				j.ID, last.To, last.Attempt, last.Seq, last.Type, j.Status, j.Attempt)
		}
		if j.Executions > j.MaxAttempts {
			overMax[j.ID] = true
			v.example("job %d: %d executions, max_attempts %d", j.ID, j.Executions, j.MaxAttempts)
		}
	}

	// Completions: the database's succeeded events and the workers' acks must name one attempt.
	done := map[int64]map[int]bool{}
	mark := func(id int64, attempt int) {
		if done[id] == nil {
			done[id] = map[int]bool{}
		}
		done[id][attempt] = true
	}
	for id, evs := range h.Events {
		// A snooze gives its execution back (a worker hands back a job whose
		// abandoned handler it still runs that way), so the runs that count
		// against max_attempts are the starts less the snoozes.
		started, snoozed := 0, 0
		for _, e := range evs {
			switch e.Type {
			case lifecycle.EventSucceeded:
				mark(id, e.Attempt)
			case lifecycle.EventStarted:
				started++
			case lifecycle.EventSnoozed:
				snoozed++
			}
		}
		if j := byID[id]; j != nil && started-snoozed > j.MaxAttempts {
			overMax[id] = true
			types := make([]string, len(evs))
			for i, e := range evs {
				types[i] = fmt.Sprintf("%s@%d", e.Type, e.Attempt)
			}
			v.example("job %d: started %d times (%d snoozed), max_attempts %d: %s", id, started, snoozed, j.MaxAttempts, strings.Join(types, " "))
		}
		v.LeaseOverlaps += leaseOverlaps(evs, &v)
		v.EarlyStalls += earlyStalls(evs, h.Lease, &v)
	}
	v.AttemptsOverMax = len(overMax)
	acked := map[int64][]ack{}
	for _, a := range h.Acks {
		mark(a.JobID, a.Attempt)
		acked[a.JobID] = append(acked[a.JobID], a)
		if j := byID[a.JobID]; j == nil || j.Status != lifecycle.StatusSucceeded {
			v.FalseAcks++
			v.example("false ack: %s reported job %d attempt %d succeeded; the job is not", a.Worker, a.JobID, a.Attempt)
		}
	}
	for id, attempts := range done {
		if len(attempts) > 1 {
			v.DupCompletions++
			v.example("job %d completed by attempts %v", id, keys(attempts))
		} else if as := acked[id]; len(as) > 1 {
			// One attempt, reported succeeded more than once: the set above
			// cannot see it.
			v.DupCompletions++
			v.example("job %d reported succeeded %d times (attempt %d by %s, attempt %d by %s)",
				id, len(as), as[0].Attempt, as[0].Worker, as[1].Attempt, as[1].Worker)
		}
	}
	v.RanAfterCancel = ranAfterCancel(h, byID, &v)

	// Side effects: one per job is the norm; each extra must be explained by a fault.
	perJob := map[int64][]effect{}
	for _, e := range h.Effects {
		perJob[e.JobID] = append(perJob[e.JobID], e)
		if !e.Held {
			v.Unleased++
		}
	}
	for _, j := range h.Jobs {
		if j.Kind != KindWork {
			continue
		}
		// The attempt that succeeded ran its handler, which records its
		// effect before it returns and returns its seq: any effect (of an
		// earlier attempt, on a worker killed since) did not show it, nor
		// that the result is this job's (helper-83).
		if j.Status == lifecycle.StatusSucceeded {
			if !slices.ContainsFunc(perJob[j.ID], func(e effect) bool { return e.Attempt == j.Attempt }) {
				v.MissingEffects++
				v.example("job %d succeeded by attempt %d, whose handler never recorded an effect", j.ID, j.Attempt)
			}
			var r struct {
				Seq *int64 `json:"seq"`
			}
			if jsonUnmarshal(j.Result, &r) != nil || r.Seq == nil || *r.Seq != seqOf(j) {
				v.Unexpected++
				v.example("job %d (seq %d) succeeded with result %s, not its handler's", j.ID, seqOf(j), j.Result)
			}
		}
		// A handler runs under a claim's attempt: an effect of an attempt
		// the job never reached ran under no claim.
		for _, e := range perJob[j.ID] {
			if e.Attempt < 1 || e.Attempt > j.Attempt {
				v.DupViolations++
				v.example("effect of job %d attempt %d by %s: the job never reached that attempt (it is at %d)", j.ID, e.Attempt, e.Worker, j.Attempt)
			}
		}
	}
	window := 2*h.Lease + 2*time.Second
	for id, effs := range perJob {
		if len(effs) < 2 {
			continue
		}
		v.DupEffects += len(effs) - 1
		winner := -1
		if j := byID[id]; j != nil && j.Status == lifecycle.StatusSucceeded {
			winner = j.Attempt
		}
		sort.Slice(effs, func(a, b int) bool { return effs[a].At.Before(effs[b].At) })
		keptWinner := false
		perAttempt := map[int]int{}
		for _, e := range effs {
			// An attempt is one claim, and one claim one execution: a second
			// effect of it is a handler run again under the same lease, which
			// no fault explains (a re-run after a fault is a new claim).
			if perAttempt[e.Attempt]++; perAttempt[e.Attempt] > 1 {
				v.DupViolations++
				v.example("duplicate effect of job %d attempt %d by %s at %s: that attempt already ran once",
					id, e.Attempt, e.Worker, e.At.Format(time.StampMilli))
				continue
			}
			if e.Attempt == winner && !keptWinner {
				keptWinner = true
				continue
			}
			if !explained(e, h.Faults, window) {
				v.DupViolations++
				v.example("duplicate effect of job %d attempt %d by %s at %s: no fault on that worker explains it",
					id, e.Attempt, e.Worker, e.At.Format(time.StampMilli))
			}
		}
	}
	return v
}

// explained reports whether an extra execution's worker was hit by a fault near
// the time of the effect: killed or paused, its connections cut, the database
// restarted, or its server killed.
func explained(e effect, faults []fault, window time.Duration) bool {
	for _, f := range faults {
		if f.affects(e.Worker) && !e.At.Before(f.Start.Add(-window)) && !e.At.After(f.End.Add(window)) {
			return true
		}
	}
	return false
}

// leaseOverlaps replays one job's events: an attempt's lease is open from its
// claim until the event that ends it; a claim while another attempt's lease is
// open, or dated before that lease ended, is an overlap.
func leaseOverlaps(evs []lifecycle.Event, v *verdict) int {
	n := 0
	open := false
	var openAttempt int
	var lastEnd time.Time
	for _, e := range evs {
		switch e.Type {
		case lifecycle.EventClaimed:
			if open && e.Attempt != openAttempt {
				n++
				v.example("job %d: attempt %d claimed while attempt %d still held the lease", e.JobID, e.Attempt, openAttempt)
			} else if e.At.Before(lastEnd) {
				n++
				v.example("job %d: attempt %d claimed at %s, before the previous lease ended at %s",
					e.JobID, e.Attempt, e.At.Format(time.StampMicro), lastEnd.Format(time.StampMicro))
			}
			open, openAttempt = true, e.Attempt
		case lifecycle.EventStalled, lifecycle.EventSucceeded, lifecycle.EventFailed, lifecycle.EventRetried,
			lifecycle.EventCanceled, lifecycle.EventUnclaimed, lifecycle.EventSnoozed, lifecycle.EventWaiting:
			if open && e.Attempt == openAttempt {
				open = false
				lastEnd = e.At
			}
		}
	}
	return n
}

// earlyStalls replays one job's events: a lease runs at least lease from its
// claim (heartbeats only extend it; claim and stall are both dated by the
// database's clock), so a stall sooner than that reaped a live lease.
func earlyStalls(evs []lifecycle.Event, lease time.Duration, v *verdict) int {
	n := 0
	claimed := map[int]time.Time{}
	for _, e := range evs {
		switch e.Type {
		case lifecycle.EventClaimed:
			claimed[e.Attempt] = e.At
		case lifecycle.EventStalled:
			// 1ms for the microsecond rounding of both times.
			if c, ok := claimed[e.Attempt]; ok && e.At.Sub(c) < lease-time.Millisecond {
				n++
				v.example("job %d: attempt %d stalled %s after its claim, before its %s lease could expire",
					e.JobID, e.Attempt, e.At.Sub(c), lease)
			}
		}
	}
	return n
}

// cancelSent reports whether the harness sent a cancel of job id.
func cancelSent(h *history, id int64) bool {
	_, ok := h.Cancels[id]
	return ok
}

// ranAfterCancel checks the acknowledged cancels: the job must end canceled,
// no attempt may start after it, and a handler it caught running must return
// within a lease of it (the holder learns of it at once from the cancel's
// wake-up, or, if that was lost, from its next heartbeat), unless
// a fault on that worker (a pause, cut connections) explains the delay.
func ranAfterCancel(h *history, byID map[int64]*driver.Job, v *verdict) int {
	n := 0
	ended := map[[2]int64]ack{}
	for _, e := range h.Ended {
		ended[[2]int64{e.JobID, int64(e.Attempt)}] = e
	}
	latest := make(map[int64]int, len(h.Effects))
	for _, e := range h.Effects {
		latest[e.JobID] = max(latest[e.JobID], e.Attempt)
	}
	window := 2*h.Lease + 2*time.Second
	ids := make([]int64, 0, len(h.Cancels))
	for id, acked := range h.Cancels {
		if acked {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		j := byID[id]
		if j == nil || j.Status != lifecycle.StatusCanceled {
			n++
			status := "missing"
			if j != nil {
				status = string(j.Status)
			}
			v.example("job %d: its cancel was acknowledged, but it is %s", id, status)
			continue
		}
		var cancel *lifecycle.Event
		for i := range h.Events[id] {
			if e := &h.Events[id][i]; e.Type == lifecycle.EventCanceled {
				cancel = e
			}
		}
		if cancel == nil {
			continue // the history check counts it
		}
		if a := latest[id]; a > cancel.Attempt {
			n++
			v.example("job %d: attempt %d ran after the cancel of attempt %d", id, a, cancel.Attempt)
		}
		if cancel.From != lifecycle.StatusRunning && cancel.From != lifecycle.StatusClaimed {
			continue
		}
		e, ok := ended[[2]int64{id, int64(cancel.Attempt)}]
		if !ok {
			continue // its worker was killed, or the harness stopped it first
		}
		late := e.At.Sub(cancel.At)
		if late > h.Lease+2*time.Second &&
			!explained(effect{Worker: e.Worker, At: cancel.At}, h.Faults, window) {
			n++
			v.example("job %d: attempt %d ran on in %s for %s after its cancel at %s",
				id, cancel.Attempt, e.Worker, late.Round(time.Millisecond), cancel.At.Format(time.StampMilli))
		}
	}
	return n
}

// seqOf returns the seq in a KindWork job's args, or -1.
func seqOf(j *driver.Job) int64 {
	var a struct {
		Seq *int64 `json:"seq"`
	}
	if j.Kind != KindWork || jsonUnmarshal(j.Args, &a) != nil || a.Seq == nil {
		return -1
	}
	return *a.Seq
}

func keys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
