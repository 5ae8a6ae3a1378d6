package chaos

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// The attempt that succeeded must have run: an effect of that attempt, and
// the result its handler returns ({"seq": n}, n the job's). missing_effects
// asked only for some effect of the job, so a job that succeeded by attempt 2
// whose attempt-2 handler never ran (only attempt 1, on a killed worker, left
// one) passed, and the result was compared with nothing (helper-83).
func TestCheckSucceededAttemptRan(t *testing.T) {
	h := base()
	// Job 3 ran twice (attempt 1 on killed w.1, attempt 2 on w.2) and
	// succeeded by attempt 2. Drop attempt 2's effect: its handler never ran,
	// yet its attempt is the one recorded succeeded.
	var kept []effect
	for _, e := range h.Effects {
		if !(e.JobID == 3 && e.Attempt == 2) {
			kept = append(kept, e)
		}
	}
	h.Effects = kept
	// Job 1's result names another seq: not what its handler returned.
	h.Jobs[0].Result = json.RawMessage(`{"seq":999}`)
	v := check(h)
	if v.MissingEffects != 1 || v.Unexpected != 1 {
		t.Errorf("job 3 succeeded by attempt 2 with no effect of attempt 2, and job 1's result is {\"seq\":999} (seq 1): "+
			"missing_effects=%d unexpected=%d, want 1 and 1; examples %v", v.MissingEffects, v.Unexpected, v.Examples)
	}
}

// An effect of an attempt the job never reached (attempt 7 of a job whose
// history ends at attempt 2) ran under no claim: a violation, even with a
// fault near that would explain an ordinary duplicate. It was taken for one
// (helper-83).
func TestCheckEffectOfAnAttemptNeverClaimed(t *testing.T) {
	h := base()
	j := h.Jobs[2] // job 3: attempts 1 (killed w.1) and 2, max_attempts 25
	j.MaxAttempts = 2
	h.Effects = append(h.Effects,
		effect{Seq: 3, JobID: 3, Attempt: 7, Worker: "w.1", Held: false, At: at(140)},
		effect{Seq: 3, JobID: 3, Attempt: 8, Worker: "w.1", Held: false, At: at(145)},
	)
	v := check(h)
	if v.DupViolations != 2 {
		t.Errorf("job 3 (history ends at attempt 2) has effects of attempts 1, 2, 7 and 8: dup_effect_violations=%d, want 2 (7 and 8); examples %v",
			v.DupViolations, v.Examples)
	}
}

// A seq has one job at most, acknowledged or not: every enqueue of it names
// its idempotency key. A seq never acknowledged was exempt, however many
// jobs it left; and indeterminate (enqueues never acknowledged) is printed
// in the summary line now, as refused enqueues are, which also fail the run
// (helper-83).
func TestCheckOneJobASeqAcknowledgedOrNot(t *testing.T) {
	h := base()
	// seq 50: sent, retried with idempotency key chaos-50 until the end, never
	// acknowledged; the database holds two jobs for it.
	h.Attempted[50] = true
	for _, id := range []int64{50, 51} {
		j, evs := okJob(id, 50, 1)
		h.Jobs = append(h.Jobs, j)
		h.Events[id] = evs
		h.Effects = append(h.Effects, effect{Seq: 50, JobID: id, Attempt: 1, Worker: "w.2", Held: true, At: at(12)})
	}
	v := check(h)
	if v.Unexpected != 1 {
		t.Errorf("two jobs (50, 51) for the one unacknowledged seq 50 (one idempotency key): unexpected=%d, want 1", v.Unexpected)
	}
	s := &Summary{Jobs: 4, Indeterminate: v.Indeterminate, RefusedEnqueues: 3}
	if line := s.String(); !strings.Contains(line, "indeterminate=1") || !strings.Contains(line, "refused_enqueues=3") {
		t.Errorf("summary line %q: want indeterminate=1 and refused_enqueues=3 in it", line)
	}
	if f := s.Failures(); !slices.Contains(f, "refused_enqueues=3, want 0") {
		t.Errorf("Failures() = %q; want refused_enqueues among them", f)
	}
}
