package lifecycle_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/lifecycle"
)

const (
	pending   = lifecycle.StatusPending
	queued    = lifecycle.StatusQueued
	claimed   = lifecycle.StatusClaimed
	running   = lifecycle.StatusRunning
	waiting   = lifecycle.StatusWaiting
	paused    = lifecycle.StatusPaused
	stalled   = lifecycle.StatusStalled
	succeeded = lifecycle.StatusSucceeded
	failed    = lifecycle.StatusFailed
	canceled  = lifecycle.StatusCanceled
	skipped   = lifecycle.StatusSkipped
)

var allOps = []lifecycle.Op{
	lifecycle.OpEnqueue, lifecycle.OpRelease, lifecycle.OpClaim, lifecycle.OpStart,
	lifecycle.OpUnclaim, lifecycle.OpHeartbeat, lifecycle.OpComplete, lifecycle.OpRetry,
	lifecycle.OpFail, lifecycle.OpSnooze, lifecycle.OpWait, lifecycle.OpWake, lifecycle.OpStall,
	lifecycle.OpRequeue, lifecycle.OpPause, lifecycle.OpResume, lifecycle.OpCancel,
}

// designTable is DESIGN.md §2, written out independently of buildTransitions.
var designTable = []lifecycle.Transition{
	{Op: lifecycle.OpEnqueue, From: "", To: queued, Event: lifecycle.EventEnqueued},
	{Op: lifecycle.OpEnqueue, From: "", To: pending, Event: lifecycle.EventEnqueued},
	{Op: lifecycle.OpRelease, From: pending, To: queued, Event: lifecycle.EventReleased},
	{Op: lifecycle.OpRelease, From: pending, To: skipped, Event: lifecycle.EventSkipped},
	{Op: lifecycle.OpClaim, From: queued, To: claimed, Event: lifecycle.EventClaimed},
	{Op: lifecycle.OpClaim, From: stalled, To: claimed, Event: lifecycle.EventClaimed},
	{Op: lifecycle.OpStart, From: claimed, To: running, Event: lifecycle.EventStarted},
	{Op: lifecycle.OpUnclaim, From: claimed, To: queued, Event: lifecycle.EventUnclaimed},
	{Op: lifecycle.OpHeartbeat, From: claimed, To: claimed, Event: lifecycle.EventHeartbeat},
	{Op: lifecycle.OpHeartbeat, From: running, To: running, Event: lifecycle.EventHeartbeat},
	{Op: lifecycle.OpComplete, From: running, To: succeeded, Event: lifecycle.EventSucceeded},
	{Op: lifecycle.OpRetry, From: running, To: queued, Event: lifecycle.EventRetried},
	{Op: lifecycle.OpFail, From: running, To: failed, Event: lifecycle.EventFailed},
	{Op: lifecycle.OpSnooze, From: running, To: queued, Event: lifecycle.EventSnoozed},
	{Op: lifecycle.OpWait, From: running, To: waiting, Event: lifecycle.EventWaiting},
	{Op: lifecycle.OpWake, From: waiting, To: queued, Event: lifecycle.EventWoke},
	{Op: lifecycle.OpStall, From: claimed, To: stalled, Event: lifecycle.EventStalled},
	{Op: lifecycle.OpStall, From: running, To: stalled, Event: lifecycle.EventStalled},
	{Op: lifecycle.OpRequeue, From: stalled, To: queued, Event: lifecycle.EventRequeued},
	{Op: lifecycle.OpRequeue, From: stalled, To: failed, Event: lifecycle.EventFailed},
	{Op: lifecycle.OpPause, From: queued, To: paused, Event: lifecycle.EventPaused},
	{Op: lifecycle.OpPause, From: waiting, To: paused, Event: lifecycle.EventPaused},
	{Op: lifecycle.OpResume, From: paused, To: queued, Event: lifecycle.EventResumed},
	{Op: lifecycle.OpCancel, From: pending, To: canceled, Event: lifecycle.EventCanceled},
	{Op: lifecycle.OpCancel, From: queued, To: canceled, Event: lifecycle.EventCanceled},
	{Op: lifecycle.OpCancel, From: claimed, To: canceled, Event: lifecycle.EventCanceled},
	{Op: lifecycle.OpCancel, From: running, To: canceled, Event: lifecycle.EventCanceled},
	{Op: lifecycle.OpCancel, From: waiting, To: canceled, Event: lifecycle.EventCanceled},
	{Op: lifecycle.OpCancel, From: paused, To: canceled, Event: lifecycle.EventCanceled},
	{Op: lifecycle.OpCancel, From: stalled, To: canceled, Event: lifecycle.EventCanceled},
}

func name(t lifecycle.Transition) string {
	from := string(t.From)
	if from == "" {
		from = "(none)"
	}
	return fmt.Sprintf("%s %s→%s", t.Op, from, t.To)
}

func TestTransitionsMatchDesign(t *testing.T) {
	for _, want := range designTable {
		t.Run(name(want), func(t *testing.T) {
			got, ok := lifecycle.Lookup(want.Op, want.From, want.To)
			if !ok {
				t.Fatalf("Lookup(%s, %q, %q): not in Transitions, want allowed", want.Op, want.From, want.To)
			}
			if got.Event != want.Event {
				t.Errorf("event = %q, want %q", got.Event, want.Event)
			}
			if err := lifecycle.Check(want.Op, want.From, want.To); err != nil {
				t.Errorf("Check = %v, want nil", err)
			}
			et, ok := lifecycle.EventTransition(want.Event, want.From, want.To)
			if !ok || et.Op != want.Op {
				t.Errorf("EventTransition(%s, %q, %q) = %v, %v; want op %s", want.Event, want.From, want.To, et.Op, ok, want.Op)
			}
		})
	}
	if len(lifecycle.Transitions) != len(designTable) {
		t.Errorf("len(Transitions) = %d, want %d (the table has edges DESIGN.md §2 does not list, or duplicates)",
			len(lifecycle.Transitions), len(designTable))
	}
	seen := map[string]bool{}
	for _, tr := range lifecycle.Transitions {
		if seen[name(tr)] {
			t.Errorf("Transitions lists %s twice", name(tr))
		}
		seen[name(tr)] = true
	}
}

// TestCheckRejectsEverythingElse tries every op on every (from, to) pair.
func TestCheckRejectsEverythingElse(t *testing.T) {
	allowed := map[string]bool{}
	for _, tr := range designTable {
		allowed[name(tr)] = true
	}
	froms := append([]lifecycle.Status{""}, lifecycle.Statuses...)
	for _, op := range allOps {
		for _, from := range froms {
			for _, to := range lifecycle.Statuses {
				tr := lifecycle.Transition{Op: op, From: from, To: to}
				err := lifecycle.Check(op, from, to)
				if allowed[name(tr)] != (err == nil) {
					t.Errorf("Check(%s): err = %v, want allowed = %v", name(tr), err, allowed[name(tr)])
				}
			}
		}
	}
}

func TestCheckForbidden(t *testing.T) {
	tests := []struct {
		op       lifecycle.Op
		from, to lifecycle.Status
		wantMsg  string
	}{
		{lifecycle.OpStart, queued, running, "not an allowed transition"},
		{lifecycle.OpClaim, queued, running, "not an allowed transition"},
		{lifecycle.OpComplete, claimed, succeeded, "not an allowed transition"},
		{lifecycle.OpStart, stalled, running, "not an allowed transition"},
		{lifecycle.OpClaim, running, claimed, "not an allowed transition"},
		{lifecycle.OpUnclaim, running, queued, "not an allowed transition"},
		{lifecycle.OpComplete, succeeded, succeeded, "terminal"},
		{lifecycle.OpFail, succeeded, failed, "terminal"},
		{lifecycle.OpCancel, succeeded, canceled, "terminal"},
		{lifecycle.OpCancel, failed, canceled, "terminal"},
		{lifecycle.OpCancel, canceled, canceled, "terminal"},
		{lifecycle.OpCancel, skipped, canceled, "terminal"},
		{lifecycle.OpRequeue, failed, queued, "terminal"},
		{lifecycle.OpEnqueue, queued, queued, "not an allowed transition"},
		{lifecycle.OpEnqueue, "", running, "(none)"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %q→%s", tt.op, tt.from, tt.to), func(t *testing.T) {
			err := lifecycle.Check(tt.op, tt.from, tt.to)
			if err == nil {
				t.Fatalf("Check = nil, want an error")
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Check error = %q, want it to mention %q", err, tt.wantMsg)
			}
		})
	}
	// Nothing leaves a terminal status, whatever the op.
	for _, from := range lifecycle.Statuses {
		if !from.Terminal() {
			continue
		}
		for _, op := range allOps {
			if got := lifecycle.Targets(op, from); len(got) != 0 {
				t.Errorf("Targets(%s, %s) = %v, want none: %s is terminal", op, from, got, from)
			}
		}
	}
}

func TestTargetsAndSources(t *testing.T) {
	if got, want := fmt.Sprint(lifecycle.Targets(lifecycle.OpRequeue, stalled)), "[failed queued]"; got != want {
		t.Errorf("Targets(requeue, stalled) = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(lifecycle.Targets(lifecycle.OpEnqueue, "")), "[pending queued]"; got != want {
		t.Errorf("Targets(enqueue, none) = %s, want %s", got, want)
	}
	if got := lifecycle.Sources(lifecycle.OpEnqueue); len(got) != 0 {
		t.Errorf("Sources(enqueue) = %v, want none", got)
	}
	got := map[lifecycle.Status]bool{}
	for _, s := range lifecycle.Sources(lifecycle.OpCancel) {
		got[s] = true
	}
	for _, s := range lifecycle.Statuses {
		if got[s] == s.Terminal() {
			t.Errorf("Sources(cancel) contains %s = %v, want %v", s, got[s], !s.Terminal())
		}
	}
}

func TestStatusHelpers(t *testing.T) {
	terminal := map[lifecycle.Status]bool{succeeded: true, failed: true, canceled: true, skipped: true}
	for _, s := range lifecycle.Statuses {
		if s.Terminal() != terminal[s] {
			t.Errorf("%s.Terminal() = %v, want %v", s, s.Terminal(), terminal[s])
		}
		if want := s == claimed || s == running; s.Leased() != want {
			t.Errorf("%s.Leased() = %v, want %v", s, s.Leased(), want)
		}
		if got, err := lifecycle.ParseStatus(string(s)); err != nil || got != s {
			t.Errorf("ParseStatus(%q) = %q, %v; want %q, nil", s, got, err, s)
		}
	}
	if _, err := lifecycle.ParseStatus("done"); err == nil || !strings.Contains(err.Error(), "queued") {
		t.Errorf("ParseStatus(done) error = %v, want one listing the valid statuses", err)
	}
	if lifecycle.Status("").Valid() {
		t.Errorf(`Status("").Valid() = true, want false`)
	}
}

func TestCheckInvariants(t *testing.T) {
	leased := lifecycle.State{HasOwner: true, HasLease: true, Attempt: 1, Executions: 1, MaxAttempts: 3}
	idle := lifecycle.State{Attempt: 1, Executions: 1, MaxAttempts: 3}
	with := func(base lifecycle.State, s lifecycle.Status, f func(*lifecycle.State)) lifecycle.State {
		base.Status = s
		if f != nil {
			f(&base)
		}
		return base
	}
	tests := []struct {
		name    string
		st      lifecycle.State
		wantErr string // "" means valid
	}{
		{"pending fresh", lifecycle.State{Status: pending, MaxAttempts: 1}, ""},
		{"queued fresh", lifecycle.State{Status: queued, MaxAttempts: 1}, ""},
		{"queued after retry", with(idle, queued, nil), ""},
		{"queued with owner", with(idle, queued, func(s *lifecycle.State) { s.HasOwner = true }), "queued job has an owner"},
		{"queued with lease", with(idle, queued, func(s *lifecycle.State) { s.HasLease = true }), "queued job has a lease"},
		{"queued with result", with(idle, queued, func(s *lifecycle.State) { s.HasResult = true }), "queued job has a result"},
		{"queued with error", with(idle, queued, func(s *lifecycle.State) { s.HasError = true }), "queued job has an error"},
		{"claimed", with(leased, claimed, func(s *lifecycle.State) { s.Executions = 0 }), ""},
		{"claimed no owner", with(leased, claimed, func(s *lifecycle.State) { s.HasOwner = false }), "claimed job has no owner"},
		{"claimed no lease", with(leased, claimed, func(s *lifecycle.State) { s.HasLease = false }), "claimed job has no lease"},
		{"claimed with result", with(leased, claimed, func(s *lifecycle.State) { s.HasResult = true }), "claimed job has a result"},
		{"running", with(leased, running, nil), ""},
		{"running no owner", with(leased, running, func(s *lifecycle.State) { s.HasOwner = false }), "running job has no owner"},
		{"running no lease", with(leased, running, func(s *lifecycle.State) { s.HasLease = false }), "running job has no lease"},
		{"running with error", with(leased, running, func(s *lifecycle.State) { s.HasError = true }), "running job has an error"},
		{"waiting", with(idle, waiting, nil), ""},
		{"waiting with lease", with(idle, waiting, func(s *lifecycle.State) { s.HasLease = true }), "waiting job has a lease"},
		{"paused", with(idle, paused, nil), ""},
		{"paused with owner", with(idle, paused, func(s *lifecycle.State) { s.HasOwner = true }), "paused job has an owner"},
		{"stalled", with(idle, stalled, nil), ""},
		{"stalled with owner", with(idle, stalled, func(s *lifecycle.State) { s.HasOwner = true }), "stalled job has an owner"},
		{"stalled with lease", with(idle, stalled, func(s *lifecycle.State) { s.HasLease = true }), "stalled job has a lease"},
		{"succeeded", with(idle, succeeded, func(s *lifecycle.State) { s.HasResult = true }), ""},
		{"succeeded no result", with(idle, succeeded, nil), "succeeded job has no result"},
		{"succeeded with error", with(idle, succeeded, func(s *lifecycle.State) { s.HasResult, s.HasError = true, true }), "succeeded job has an error"},
		{"succeeded with lease", with(idle, succeeded, func(s *lifecycle.State) { s.HasResult, s.HasLease = true, true }), "succeeded job has a lease"},
		{"failed", with(idle, failed, func(s *lifecycle.State) { s.HasError = true }), ""},
		{"failed no error", with(idle, failed, nil), "failed job has no error"},
		{"failed with result", with(idle, failed, func(s *lifecycle.State) { s.HasError, s.HasResult = true, true }), "failed job has a result"},
		{"failed with owner", with(idle, failed, func(s *lifecycle.State) { s.HasError, s.HasOwner = true, true }), "failed job has an owner"},
		{"canceled", with(idle, canceled, nil), ""},
		{"canceled with lease", with(idle, canceled, func(s *lifecycle.State) { s.HasLease = true }), "canceled job has a lease"},
		{"canceled with error", with(idle, canceled, func(s *lifecycle.State) { s.HasError = true }), "canceled job has an error"},
		{"skipped", lifecycle.State{Status: skipped, MaxAttempts: 1}, ""},
		{"skipped with result", lifecycle.State{Status: skipped, MaxAttempts: 1, HasResult: true}, "skipped job has a result"},
		{"unknown status", lifecycle.State{Status: "done", MaxAttempts: 1}, `unknown status "done"`},
		{"negative attempt", with(idle, queued, func(s *lifecycle.State) { s.Attempt = -1; s.Executions = 0 }), "negative attempt"},
		{"executions above attempt", with(idle, queued, func(s *lifecycle.State) { s.Executions = 2 }), "executions 2 > attempt 1"},
		{"executions above max_attempts", with(idle, queued, func(s *lifecycle.State) { s.Attempt, s.Executions, s.MaxAttempts = 5, 4, 3 }), "executions 4 > max_attempts 3"},
		{"attempt above max_attempts is fine (unclaims, snoozes)", with(idle, queued, func(s *lifecycle.State) { s.Attempt = 9 }), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := lifecycle.CheckInvariants(tt.st)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("CheckInvariants(%+v) = %v, want nil", tt.st, err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("CheckInvariants(%+v) = nil, want an error containing %q", tt.st, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("CheckInvariants(%+v) = %q, want it to contain %q", tt.st, err, tt.wantErr)
			}
		})
	}
}

// hist builds a history with seq 1, 2, 3… and attempts following the claims.
type hist struct {
	events  []lifecycle.Event
	attempt int
}

func (h *hist) add(typ lifecycle.EventType, from, to lifecycle.Status, reqID string) *hist {
	if typ == lifecycle.EventClaimed {
		h.attempt++
	}
	h.events = append(h.events, lifecycle.Event{
		JobID: 1, Seq: int64(len(h.events) + 1), Type: typ, From: from, To: to,
		At: time.Unix(int64(len(h.events)), 0), Actor: "test", RequestID: reqID, Attempt: h.attempt,
	})
	return h
}

func (h *hist) enq() *hist { return h.add(lifecycle.EventEnqueued, "", queued, "") }
func (h *hist) claim(from lifecycle.Status) *hist {
	return h.add(lifecycle.EventClaimed, from, claimed, "")
}
func (h *hist) start() *hist { return h.add(lifecycle.EventStarted, claimed, running, "") }

func TestCheckHistoryLegal(t *testing.T) {
	tests := []struct {
		name string
		h    *hist
	}{
		{"enqueue claim start succeed", new(hist).enq().claim(queued).start().add(lifecycle.EventSucceeded, running, succeeded, "r1")},
		{"claim stall requeue claim", new(hist).enq().claim(queued).add(lifecycle.EventStalled, claimed, stalled, "").
			add(lifecycle.EventRequeued, stalled, queued, "").claim(queued).start().add(lifecycle.EventSucceeded, running, succeeded, "")},
		{"stalled reclaimed directly", new(hist).enq().claim(queued).start().add(lifecycle.EventStalled, running, stalled, "").claim(stalled)},
		{"running stall then failed", new(hist).enq().claim(queued).start().add(lifecycle.EventStalled, running, stalled, "").
			add(lifecycle.EventFailed, stalled, failed, "")},
		{"retry then fail", new(hist).enq().claim(queued).start().add(lifecycle.EventRetried, running, queued, "f1").
			claim(queued).start().add(lifecycle.EventFailed, running, failed, "f2")},
		{"retry then succeed", new(hist).enq().claim(queued).start().add(lifecycle.EventRetried, running, queued, "").
			claim(queued).start().add(lifecycle.EventSucceeded, running, succeeded, "")},
		{"snooze", new(hist).enq().claim(queued).start().add(lifecycle.EventSnoozed, running, queued, "").
			claim(queued).start().add(lifecycle.EventSucceeded, running, succeeded, "")},
		{"unclaim", new(hist).enq().claim(queued).add(lifecycle.EventUnclaimed, claimed, queued, "").claim(queued)},
		{"cancel queued", new(hist).enq().add(lifecycle.EventCanceled, queued, canceled, "c1")},
		{"cancel running", new(hist).enq().claim(queued).start().add(lifecycle.EventCanceled, running, canceled, "")},
		{"cancel pending", new(hist).add(lifecycle.EventEnqueued, "", pending, "").add(lifecycle.EventCanceled, pending, canceled, "")},
		{"release and skip", new(hist).add(lifecycle.EventEnqueued, "", pending, "").add(lifecycle.EventSkipped, pending, skipped, "")},
		{"heartbeat events", new(hist).enq().claim(queued).add(lifecycle.EventHeartbeat, claimed, claimed, "").start().
			add(lifecycle.EventHeartbeat, running, running, "")},
		{"wait wake pause resume", new(hist).enq().claim(queued).start().add(lifecycle.EventWaiting, running, waiting, "").
			add(lifecycle.EventPaused, waiting, paused, "").add(lifecycle.EventResumed, paused, queued, "").claim(queued)},
		{"enqueue only", new(hist).enq()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := lifecycle.CheckHistory(tt.h.events); err != nil {
				t.Errorf("CheckHistory = %v, want nil", err)
			}
		})
	}
	// seq may skip (heartbeats bump rev without an event).
	h := new(hist).enq().claim(queued).start()
	h.events[2].Seq = 7
	if err := lifecycle.CheckHistory(h.events); err != nil {
		t.Errorf("CheckHistory with a skipped seq = %v, want nil", err)
	}
}

func TestCheckHistoryIllegal(t *testing.T) {
	tests := []struct {
		name    string
		events  func() []lifecycle.Event
		wantErr string
	}{
		{"empty", func() []lifecycle.Event { return nil }, "empty history"},
		{"starts with claim", func() []lifecycle.Event {
			return new(hist).claim(queued).events
		}, "must start with enqueue"},
		{"enqueue twice", func() []lifecycle.Event {
			return new(hist).enq().enq().events
		}, "enqueue after the job exists"},
		{"gap in from/to", func() []lifecycle.Event {
			return new(hist).enq().claim(queued).add(lifecycle.EventSucceeded, running, succeeded, "").events
		}, "job was claimed, not running"},
		{"edge not in table", func() []lifecycle.Event {
			return new(hist).enq().add(lifecycle.EventStarted, queued, running, "").events
		}, "not an allowed transition"},
		{"event type does not match edge", func() []lifecycle.Event {
			return new(hist).enq().add(lifecycle.EventSucceeded, queued, claimed, "").events
		}, "not an allowed transition"},
		{"event after terminal", func() []lifecycle.Event {
			return new(hist).enq().add(lifecycle.EventCanceled, queued, canceled, "").
				add(lifecycle.EventCanceled, canceled, canceled, "").events
		}, "not an allowed transition"},
		{"legal edge after terminal", func() []lifecycle.Event {
			h := new(hist).enq().claim(queued).start().add(lifecycle.EventSucceeded, running, succeeded, "")
			return h.add(lifecycle.EventRetried, running, queued, "").events
		}, "terminal"},
		{"attempt not +1 on claim", func() []lifecycle.Event {
			h := new(hist).enq().claim(queued)
			h.events[1].Attempt = 2
			return h.events
		}, "attempt 2, want 1"},
		{"attempt unchanged on claim", func() []lifecycle.Event {
			h := new(hist).enq().claim(queued).add(lifecycle.EventUnclaimed, claimed, queued, "").claim(queued)
			h.events[3].Attempt = 1
			return h.events
		}, "attempt 1, want 2"},
		{"attempt changing on start", func() []lifecycle.Event {
			h := new(hist).enq().claim(queued).start()
			h.events[2].Attempt = 2
			return h.events
		}, "attempt 2, want 1"},
		{"attempt on enqueue", func() []lifecycle.Event {
			h := new(hist).enq()
			h.events[0].Attempt = 1
			return h.events
		}, "attempt 1, want 0"},
		{"repeated request_id", func() []lifecycle.Event {
			return new(hist).enq().add(lifecycle.EventClaimed, queued, claimed, "r1").
				add(lifecycle.EventStarted, claimed, running, "r1").events
		}, `request_id "r1" already applied`},
		{"seq not growing", func() []lifecycle.Event {
			h := new(hist).enq().claim(queued).start()
			h.events[2].Seq = 2
			return h.events
		}, "seq does not grow"},
		{"seq going back", func() []lifecycle.Event {
			h := new(hist).enq().claim(queued).start()
			h.events[2].Seq = 1
			return h.events
		}, "seq does not grow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := lifecycle.CheckHistory(tt.events())
			if err == nil {
				t.Fatalf("CheckHistory = nil, want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("CheckHistory = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}
