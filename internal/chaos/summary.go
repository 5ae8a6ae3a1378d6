package chaos

import (
	"fmt"
	"strings"
	"time"
)

// Summary is the outcome of a run: what was injected and what the checks found.
type Summary struct {
	Driver  string        `json:"driver"`
	Profile string        `json:"profile"`
	Seed    int64         `json:"seed"`
	Elapsed time.Duration `json:"elapsed_ns"`

	// What went in.
	Jobs          int `json:"jobs"`          // acknowledged enqueues
	Indeterminate int `json:"indeterminate"` // enqueues never acknowledged
	WorkerKills   int `json:"worker_kills"`  // SIGKILLs of workers (leader kills included)
	DBRestarts    int `json:"db_restarts"`   // pg_ctl restart -m immediate
	BackendKills  int `json:"backend_kills"` // pg_terminate_backend rounds
	Pauses        int `json:"pauses"`        // SIGSTOP for twice the lease, then SIGCONT
	LeaderKills   int `json:"leader_kills"`
	Probes        int `json:"probes"`  // bad inputs sent
	Cancels       int `json:"cancels"` // cancels of long jobs, answered canceled

	// Checks that must be zero.
	Lost             int `json:"lost"`
	Unexpected       int `json:"unexpected"`
	Stuck            int `json:"stuck"`
	DupCompletions   int `json:"dup_completions"`
	FalseAcks        int `json:"false_acks"`
	LeaseOverlaps    int `json:"lease_overlaps"`
	EarlyStalls      int `json:"early_stalls"`
	RanAfterCancel   int `json:"ran_after_cancel"`
	IllegalHistories int `json:"illegal_histories"`
	AttemptsOverMax  int `json:"attempts_over_max"`
	Failed           int `json:"failed"`
	MissingEffects   int `json:"missing_effects"`
	DupViolations    int `json:"dup_effect_violations"`
	LeaderOverlaps   int `json:"leader_overlaps"`
	ProbeFailures    int `json:"probe_failures"`
	// RefusedEnqueues are valid enqueues the system refused: the harness
	// sends only valid ones, and drops a refused one's seq from its ledger,
	// so no other check sees the job. Recorded only as a problem, a run with
	// them passed (helper-83).
	RefusedEnqueues int `json:"refused_enqueues"`

	// Must be at least Pauses.
	StaleRejected int `json:"stale_rejected"`

	// Informational.
	DupEffects    int           `json:"dup_effects"`      // allowed by at-least-once; each explained by a fault
	Unleased      int           `json:"unleased_effects"` // effects written after the lease was gone
	SkewJobs      int           `json:"skew_jobs"`        // jobs completed by the clock-skewed workers
	LeaderChanges int           `json:"leader_changes"`
	MaxTakeover   time.Duration `json:"max_takeover_ns"` // longest time without a leader after a leader kill

	Problems []string `json:"problems,omitempty"` // what failed, with examples
}

// String is the one-line summary.
func (s *Summary) String() string {
	f := []string{
		fmt.Sprintf("jobs=%d", s.Jobs),
		fmt.Sprintf("worker_kills=%d", s.WorkerKills),
		fmt.Sprintf("db_restarts=%d", s.DBRestarts),
		fmt.Sprintf("backend_kills=%d", s.BackendKills),
		fmt.Sprintf("pauses=%d", s.Pauses),
		fmt.Sprintf("leader_kills=%d", s.LeaderKills),
		fmt.Sprintf("probes=%d", s.Probes),
		fmt.Sprintf("lost=%d", s.Lost),
		fmt.Sprintf("unexpected=%d", s.Unexpected),
		fmt.Sprintf("stuck=%d", s.Stuck),
		fmt.Sprintf("dup_completions=%d", s.DupCompletions),
		fmt.Sprintf("lease_overlaps=%d", s.LeaseOverlaps),
		fmt.Sprintf("early_stalls=%d", s.EarlyStalls),
		fmt.Sprintf("cancels=%d", s.Cancels),
		fmt.Sprintf("ran_after_cancel=%d", s.RanAfterCancel),
		fmt.Sprintf("illegal_histories=%d", s.IllegalHistories),
		fmt.Sprintf("attempts_over_max=%d", s.AttemptsOverMax),
		fmt.Sprintf("stale_rejected=%d", s.StaleRejected),
		fmt.Sprintf("dup_effects=%d", s.DupEffects),
		fmt.Sprintf("dup_effect_violations=%d", s.DupViolations),
		fmt.Sprintf("leader_overlaps=%d", s.LeaderOverlaps),
		fmt.Sprintf("probe_failures=%d", s.ProbeFailures),
		fmt.Sprintf("skew_jobs=%d", s.SkewJobs),
		fmt.Sprintf("driver=%s", s.Driver),
		fmt.Sprintf("elapsed=%s", s.Elapsed.Round(time.Second)),
		fmt.Sprintf("seed=%d", s.Seed),
	}
	if s.FalseAcks+s.Failed+s.MissingEffects > 0 {
		f = append(f, fmt.Sprintf("false_acks=%d failed=%d missing_effects=%d", s.FalseAcks, s.Failed, s.MissingEffects))
	}
	if s.RefusedEnqueues > 0 {
		f = append(f, fmt.Sprintf("refused_enqueues=%d", s.RefusedEnqueues))
	}
	if s.Indeterminate > 0 {
		// Enqueues never acknowledged: their jobs are checked for being one
		// a seq (its idempotency key), not for being there.
		f = append(f, fmt.Sprintf("indeterminate=%d", s.Indeterminate))
	}
	return strings.Join(f, " ")
}

// Failures lists the checks that failed; empty means the run passed.
func (s *Summary) Failures() []string {
	var out []string
	must := func(name string, n int) {
		if n != 0 {
			out = append(out, fmt.Sprintf("%s=%d, want 0", name, n))
		}
	}
	must("lost", s.Lost)
	must("unexpected", s.Unexpected)
	must("stuck", s.Stuck)
	must("dup_completions", s.DupCompletions)
	must("false_acks", s.FalseAcks)
	must("lease_overlaps", s.LeaseOverlaps)
	must("early_stalls", s.EarlyStalls)
	must("ran_after_cancel", s.RanAfterCancel)
	must("illegal_histories", s.IllegalHistories)
	must("attempts_over_max", s.AttemptsOverMax)
	must("failed", s.Failed)
	must("missing_effects", s.MissingEffects)
	must("dup_effect_violations", s.DupViolations)
	must("leader_overlaps", s.LeaderOverlaps)
	must("probe_failures", s.ProbeFailures)
	must("refused_enqueues", s.RefusedEnqueues)
	if s.StaleRejected < s.Pauses {
		out = append(out, fmt.Sprintf("stale_rejected=%d < pauses=%d: a paused worker's late writes were not all seen rejected", s.StaleRejected, s.Pauses))
	}
	if s.Jobs == 0 {
		out = append(out, "no job was enqueued")
	}
	return out
}
