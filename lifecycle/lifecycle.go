package lifecycle

import (
	"fmt"
	"sort"
)

// Status is the state of a job.
type Status string

// The job statuses. succeeded, failed, canceled and skipped are terminal.
const (
	StatusPending   Status = "pending"   // waits for workflow dependencies
	StatusQueued    Status = "queued"    // claimable once run_at <= now
	StatusClaimed   Status = "claimed"   // leased to a worker, not started
	StatusRunning   Status = "running"   // leased and executing
	StatusWaiting   Status = "waiting"   // durable sleep or approval wait
	StatusPaused    Status = "paused"    // held by an operator
	StatusStalled   Status = "stalled"   // lease expired; owner no longer trusted
	StatusSucceeded Status = "succeeded" // terminal, has result
	StatusFailed    Status = "failed"    // terminal, has error
	StatusCanceled  Status = "canceled"  // terminal
	StatusSkipped   Status = "skipped"   // terminal, upstream failed
)

// Statuses lists every status in lifecycle order.
var Statuses = []Status{
	StatusPending, StatusQueued, StatusClaimed, StatusRunning, StatusWaiting, StatusPaused,
	StatusStalled, StatusSucceeded, StatusFailed, StatusCanceled, StatusSkipped,
}

// Terminal reports whether no transition may leave s.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusCanceled, StatusSkipped:
		return true
	}
	return false
}

// Leased reports whether a job in s must have an owner and a lease.
func (s Status) Leased() bool { return s == StatusClaimed || s == StatusRunning }

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if v == s {
			return true
		}
	}
	return false
}

// ParseStatus returns the status named s or an error naming the valid ones.
func ParseStatus(s string) (Status, error) {
	if Status(s).Valid() {
		return Status(s), nil
	}
	return "", fmt.Errorf("unknown status %q (want one of %v)", s, Statuses)
}

// Op is an operation that moves a job between statuses.
type Op string

// The operations of DESIGN.md §2.
const (
	OpEnqueue   Op = "enqueue"
	OpRelease   Op = "release"
	OpClaim     Op = "claim"
	OpStart     Op = "start"
	OpUnclaim   Op = "unclaim"
	OpHeartbeat Op = "heartbeat"
	OpComplete  Op = "complete"
	OpRetry     Op = "retry"
	OpFail      Op = "fail"
	OpSnooze    Op = "snooze"
	OpWait      Op = "wait"
	OpWake      Op = "wake"
	OpStall     Op = "stall"
	OpRequeue   Op = "requeue"
	OpPause     Op = "pause"
	OpResume    Op = "resume"
	OpCancel    Op = "cancel"
)

// EventType names an entry of a job's event log.
type EventType string

// The event vocabulary. Every accepted transition appends exactly one event.
const (
	EventEnqueued  EventType = "enqueued"
	EventClaimed   EventType = "claimed"
	EventUnclaimed EventType = "unclaimed"
	EventStarted   EventType = "started"
	EventHeartbeat EventType = "heartbeat"
	EventSucceeded EventType = "succeeded"
	EventRetried   EventType = "retried"
	EventSnoozed   EventType = "snoozed"
	EventFailed    EventType = "failed"
	EventStalled   EventType = "stalled"
	EventRequeued  EventType = "requeued"
	EventWaiting   EventType = "waiting"
	EventWoke      EventType = "woke"
	EventPaused    EventType = "paused"
	EventResumed   EventType = "resumed"
	EventCanceled  EventType = "canceled"
	EventSkipped   EventType = "skipped"
	EventReleased  EventType = "released"
)

// Transition is one allowed edge of the state machine.
type Transition struct {
	Op    Op
	From  Status // "" for enqueue (the job does not exist yet)
	To    Status
	Event EventType
}

// Transitions is the complete table of allowed transitions. Nothing else is legal.
var Transitions = buildTransitions()

func buildTransitions() []Transition {
	t := []Transition{
		{OpEnqueue, "", StatusQueued, EventEnqueued},
		{OpEnqueue, "", StatusPending, EventEnqueued},
		{OpRelease, StatusPending, StatusQueued, EventReleased},
		{OpRelease, StatusPending, StatusSkipped, EventSkipped},
		{OpClaim, StatusQueued, StatusClaimed, EventClaimed},
		{OpClaim, StatusStalled, StatusClaimed, EventClaimed},
		{OpStart, StatusClaimed, StatusRunning, EventStarted},
		{OpUnclaim, StatusClaimed, StatusQueued, EventUnclaimed},
		{OpHeartbeat, StatusClaimed, StatusClaimed, EventHeartbeat},
		{OpHeartbeat, StatusRunning, StatusRunning, EventHeartbeat},
		{OpComplete, StatusRunning, StatusSucceeded, EventSucceeded},
		{OpRetry, StatusRunning, StatusQueued, EventRetried},
		{OpFail, StatusRunning, StatusFailed, EventFailed},
		{OpSnooze, StatusRunning, StatusQueued, EventSnoozed},
		{OpWait, StatusRunning, StatusWaiting, EventWaiting},
		{OpWake, StatusWaiting, StatusQueued, EventWoke},
		{OpStall, StatusClaimed, StatusStalled, EventStalled},
		{OpStall, StatusRunning, StatusStalled, EventStalled},
		{OpRequeue, StatusStalled, StatusQueued, EventRequeued},
		{OpRequeue, StatusStalled, StatusFailed, EventFailed},
		{OpPause, StatusQueued, StatusPaused, EventPaused},
		{OpPause, StatusWaiting, StatusPaused, EventPaused},
		{OpResume, StatusPaused, StatusQueued, EventResumed},
	}
	for _, s := range Statuses {
		if !s.Terminal() {
			t = append(t, Transition{OpCancel, s, StatusCanceled, EventCanceled})
		}
	}
	return t
}

// Lookup returns the transition op performs from → to, if it is allowed.
func Lookup(op Op, from, to Status) (Transition, bool) {
	for _, t := range Transitions {
		if t.Op == op && t.From == from && t.To == to {
			return t, true
		}
	}
	return Transition{}, false
}

// Targets returns the statuses op may move a job in from to, sorted.
func Targets(op Op, from Status) []Status {
	var out []Status
	for _, t := range Transitions {
		if t.Op == op && t.From == from {
			out = append(out, t.To)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Sources returns the statuses op may be applied to.
func Sources(op Op) []Status {
	seen := map[Status]bool{}
	var out []Status
	for _, t := range Transitions {
		if t.Op == op && t.From != "" && !seen[t.From] {
			seen[t.From] = true
			out = append(out, t.From)
		}
	}
	return out
}

// Check returns nil if op may move a job from → to, else an error that says why.
func Check(op Op, from, to Status) error {
	if _, ok := Lookup(op, from, to); ok {
		return nil
	}
	if from.Terminal() {
		return fmt.Errorf("%s: job is %s, which is terminal", op, from)
	}
	return fmt.Errorf("%s: %s → %s is not an allowed transition", op, orNone(from), to)
}

// EventTransition finds the transition an event (type, from, to) records.
func EventTransition(typ EventType, from, to Status) (Transition, bool) {
	for _, t := range Transitions {
		if t.Event == typ && t.From == from && t.To == to {
			return t, true
		}
	}
	return Transition{}, false
}

func orNone(s Status) string {
	if s == "" {
		return "(none)"
	}
	return string(s)
}
