package lifecycle

import (
	"errors"
	"fmt"
	"time"
)

// State is the part of a job the per-status invariants talk about.
type State struct {
	Status      Status
	HasOwner    bool // owner (worker id) set
	HasLease    bool // lease_token or lease_expires_at set
	HasResult   bool // result set (JSON null counts as set)
	HasError    bool // final error set
	Attempt     int  // claims so far
	Executions  int  // claims that reached running, net of snoozes
	MaxAttempts int
}

// CheckInvariants returns an error for every per-status invariant st breaks:
// owner and lease only in claimed/running; result only (and always) on succeeded;
// error only (and always) on failed; executions never above attempt nor max_attempts.
func CheckInvariants(st State) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !st.Status.Valid() {
		bad("unknown status %q", st.Status)
	}
	leased := st.Status.Leased()
	if leased && !st.HasOwner {
		bad("%s job has no owner", st.Status)
	}
	if leased && !st.HasLease {
		bad("%s job has no lease", st.Status)
	}
	if !leased && st.HasOwner {
		bad("%s job has an owner", st.Status)
	}
	if !leased && st.HasLease {
		bad("%s job has a lease", st.Status)
	}
	if st.Status == StatusSucceeded && !st.HasResult {
		bad("succeeded job has no result")
	}
	if st.Status != StatusSucceeded && st.HasResult {
		bad("%s job has a result", st.Status)
	}
	if st.Status == StatusFailed && !st.HasError {
		bad("failed job has no error")
	}
	if st.Status != StatusFailed && st.HasError {
		bad("%s job has an error", st.Status)
	}
	if st.Attempt < 0 || st.Executions < 0 {
		bad("negative attempt (%d) or executions (%d)", st.Attempt, st.Executions)
	}
	if st.Executions > st.Attempt {
		bad("executions %d > attempt %d", st.Executions, st.Attempt)
	}
	if st.MaxAttempts > 0 && st.Executions > st.MaxAttempts {
		bad("executions %d > max_attempts %d", st.Executions, st.MaxAttempts)
	}
	return errors.Join(errs...)
}

// Event is one entry of a job's transition log, as drivers store it.
type Event struct {
	JobID     int64     `json:"job_id"`
	Seq       int64     `json:"seq"` // the job's rev after the transition; grows, may skip (heartbeats)
	Type      EventType `json:"type"`
	From      Status    `json:"from"`
	To        Status    `json:"to"`
	At        time.Time `json:"at"`
	Actor     string    `json:"actor"`
	RequestID string    `json:"request_id,omitempty"`
	Attempt   int       `json:"attempt"` // the job's attempt after the transition
}

// CheckHistory replays a job's events in order and returns an error describing the
// first illegal step: a first event that is not an enqueue, an event whose from is
// not the previous to, an edge the table does not allow, an event after a terminal
// status, a seq that does not grow, an attempt that changes other than by +1 on a
// claim, or a request_id used twice.
func CheckHistory(events []Event) error {
	if len(events) == 0 {
		return errors.New("empty history: a job's log starts with its enqueue")
	}
	var cur Status
	attempt := 0
	var seq int64
	requests := map[string]int64{}
	for i, e := range events {
		where := fmt.Sprintf("event %d (seq %d, %s %s→%s)", i, e.Seq, e.Type, orNone(e.From), e.To)
		t, ok := EventTransition(e.Type, e.From, e.To)
		switch {
		case !ok:
			return fmt.Errorf("%s: not an allowed transition", where)
		case i == 0 && t.Op != OpEnqueue:
			return fmt.Errorf("%s: history must start with enqueue", where)
		case i > 0 && t.Op == OpEnqueue:
			return fmt.Errorf("%s: enqueue after the job exists", where)
		case i > 0 && cur.Terminal():
			return fmt.Errorf("%s: job was already %s (terminal)", where, cur)
		case i > 0 && e.From != cur:
			return fmt.Errorf("%s: job was %s, not %s", where, cur, e.From)
		case i > 0 && e.Seq <= seq:
			return fmt.Errorf("%s: seq does not grow (previous %d)", where, seq)
		}
		want := attempt
		if t.Op == OpClaim {
			want = attempt + 1
		}
		if e.Attempt != want {
			return fmt.Errorf("%s: attempt %d, want %d", where, e.Attempt, want)
		}
		if e.RequestID != "" {
			if prev, dup := requests[e.RequestID]; dup {
				return fmt.Errorf("%s: request_id %q already applied at seq %d", where, e.RequestID, prev)
			}
			requests[e.RequestID] = e.Seq
		}
		cur, attempt, seq = e.To, e.Attempt, e.Seq
	}
	return nil
}
