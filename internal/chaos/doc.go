// Package chaos is the fault-injection harness behind `drover chaos`: it proves,
// with real processes, a real PostgreSQL and real signals, that what goes in
// comes out once (Jepsen's queue checkers) and that a paused lease holder cannot
// write (Kleppmann's fencing argument).
//
// # Setup
//
// The harness runs its own PostgreSQL cluster (initdb into a temporary directory,
// its own port and socket directory, run as the postgres OS user when the harness
// is root), so crashing it touches no other database. It migrates the schema,
// creates the effect log (chaos_effects) and starts child processes, each an
// incarnation "slot.n" of a slot: a server (HTTP API, worker protocol, engine),
// library workers (worker and engine on the database), remote workers (worker
// protocol only; they open the database just for the effect log, as a user's
// handler would write to its own store) and, from phase 5, workers with a skewed
// clock. Every child connects with application_name=chaos-<incarnation>, so
// pg_terminate_backend can cut one process's connections. An in-process enqueuer
// sends jobs through the library (one by one and in batches) and through POST
// /jobs, and keeps a ledger: a seq in every job's args, and the job id of every
// enqueue whose call returned success. A failed call is retried with the same
// idempotency key, so an enqueue that committed before its answer was lost is
// acknowledged by the retry rather than left unaccounted for.
//
// The KindWork handler writes its side effect first — one effect row (seq, job,
// attempt, worker, lease token, whether it still held the lease) — then sleeps a
// few milliseconds and returns {"seq": n}. Children report on stdout: "ok" when
// the worker recorded a success, "lost" when a write of theirs was refused as
// stale (drover.Observer), "leader true|false" from the engine, and "stats" on
// request; the harness waits on these lines, never on sleeps (timers only pace
// the fault schedule). Long handlers (a second or more) also print "ended" when
// they return.
//
// Throughout phases 1 to 7 a canceler enqueues a 10 s KindWork job every 0.7 s
// and cancels it through the library: every other one at once (queued or just
// claimed), the rest once a worker runs it.
//
// # Phases
//
//  1. baseline load;
//  2. SIGKILL a random worker every few seconds, restart it;
//  3. `pg_ctl restart -m immediate`, and pg_terminate_backend on one process's connections;
//  4. SIGSTOP a worker that holds jobs for twice the lease and until the reaper
//     has taken its jobs back (an expired lease is the holder's until then),
//     SIGCONT it, and count its refused late writes (stale_rejected must be at
//     least pauses);
//  5. workers whose clock is shifted by +30 s and -30 s join. A process's wall
//     clock cannot be changed without privileges, and Go reads it through the
//     vDSO, so it is simulated: the handler's own notion of time (worker_at in
//     the effect log) is shifted. Drover computes every lease expiry, run_at and
//     retry time in SQL with now(), and the worker's own timers are durations on
//     the monotonic clock, so the shift must change nothing: skew_jobs counts
//     the jobs they completed, under the same checks as every other job;
//  6. SIGKILL the engine leader (read from drover_leader) repeatedly and wait for a successor;
//  7. bad input over HTTP: invalid JSON, oversized and non-object args,
//     negative priority, NUL bytes, a bad run_at, an unknown kind (fails after
//     max_attempts), a panicking handler, a handler that never returns (timeout),
//     a far-future run_at (must stay queued), 50 concurrent enqueues with one
//     idempotency key (exactly one job), while ordinary jobs keep completing;
//  8. drain: stop faults, finish enqueuing, wait until every job is terminal.
//
// The SQLite driver runs phases 1, 2 and 8 with one worker process on the file.
//
// # Checks
//
// From the database, the ledger, the effect log and the children's lines:
// lost (acknowledged, not terminal or missing), unexpected (in the database, not
// in the ledger nor a probe), stuck (non-terminal after the drain, far-future
// probe excepted), dup_completions (two attempts completed: succeeded events or
// workers' "ok", or one attempt reported "ok" twice), lease_overlaps (an attempt
// claimed while another attempt's lease was open, replayed from the events),
// early_stalls (an attempt stalled sooner than a lease after its claim: the
// reaper took a lease that had not run out), ran_after_cancel (an acknowledged
// cancel whose job did not end canceled, was run again by a later attempt, or
// whose running handler returned more than a lease and 2 s after it with no
// fault on its worker to explain the delay), illegal_histories
// (lifecycle.CheckHistory and CheckInvariants, and the history must end in the
// job's status and attempt: a dropped last event leaves a legal prefix),
// attempts_over_max, leader_overlaps
// (from the polled drover_leader row and from the engines' own lines),
// probe_failures, and dup_effects: effect rows beyond one per job, allowed by
// at-least-once but each one must come from an incarnation that a fault (kill,
// pause, cut connection, database or server crash) hit near that time, or it
// counts as a dup_effect_violation; so does a second effect of one attempt,
// whatever the faults (a run after a fault is a new claim, a new attempt). Summary.Failures lists what failed.
package chaos
