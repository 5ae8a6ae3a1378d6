package driver

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/drover-dev/drover/lifecycle"
)

// Sentinel errors every driver returns (wrapped with context) so callers can branch
// with errors.Is. The root package re-exports them.
var (
	// ErrNotFound: no job (or other row) with that id.
	ErrNotFound = errors.New("not found")
	// ErrLeaseLost: the call's attempt or lease_token is not the job's current one,
	// or the job left the status the call expects. Nothing was changed.
	ErrLeaseLost = errors.New("lease lost: stale attempt or lease token, or job no longer in the expected status")
	// ErrInvalidTransition: the operation is not allowed from the job's status
	// (for example canceling a succeeded job). Nothing was changed.
	ErrInvalidTransition = errors.New("invalid transition")
	// ErrInvalidArgument: bad input; always wrapped in a *ValidationError.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrSchemaAhead: the database's schema is newer than every migration this
	// build ships. A newer version migrated it, and this one would misread what
	// that version stores (the compact event rows of pgdriver 008 and 009, for
	// one); nothing was read or written.
	ErrSchemaAhead = errors.New("database schema is newer than this build of drover")
	// ErrSchemaDirty: the schema's version is marked dirty, so a migration to
	// it stopped half-way (an older drover's, whose golang-migrate marked,
	// migrated and cleared in three transactions, or a down migration). Nothing
	// was migrated; SchemaDirtyError says how to clear the mark.
	ErrSchemaDirty = errors.New("database schema is marked dirty")
	// ErrRequestReused: the call carries a request_id the job's log (or a
	// claim) holds from another call: another job's attempt, another kind of
	// call, or another outcome than the one stored. It is no repeat of that
	// call, and was refused: nothing changed. Always a *ValidationError on
	// request_id with Conflict set, so errors.Is matches ErrInvalidArgument
	// too; the HTTP server answers it 409 (code "conflict").
	ErrRequestReused = errors.New("request_id used by another call")
)

// SchemaDirtyError is ErrSchemaDirty for one version: it names the statement
// that clears the mark in the driver's own version table (drover has no
// command that forces a version, as golang-migrate's own message asks).
// Cause is the migration tool's error for it (migrate.ErrDirty), if any.
type SchemaDirtyError struct {
	Version uint
	Table   string
	Cause   error
}

func (e *SchemaDirtyError) Error() string {
	if e.Version == 0 {
		// golang-migrate's Down records no version as -1, dirty while the
		// first version's down migration runs, and deletes the row after it.
		return fmt.Sprintf("%v: the down migration to no version (-1 in %s) stopped half-way; "+
			"make the schema what no migration leaves, then clear the mark: DELETE FROM %s", ErrSchemaDirty, e.Table, e.Table)
	}
	return fmt.Sprintf("%v: migration %d stopped half-way (an older drover's, or a down migration); "+
		"make the schema what %d leaves, then clear the mark: UPDATE %s SET dirty = false", ErrSchemaDirty, e.Version, e.Version, e.Table)
}

// Unwrap makes errors.Is(err, ErrSchemaDirty) true, and errors.As finds Cause.
func (e *SchemaDirtyError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrSchemaDirty}
	}
	return []error{ErrSchemaDirty, e.Cause}
}

// ValidationError names the field that was rejected and why.
type ValidationError struct {
	Field    string
	Reason   string
	TooLarge bool // the value exceeds a size limit (HTTP 413 rather than 400)
	// Conflict: the value is well-formed but another call holds it (a
	// request_id another call used: ErrRequestReused; HTTP 409 rather than 400).
	Conflict bool
}

func (e *ValidationError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason) }

// Unwrap makes errors.Is(err, ErrInvalidArgument) true, and with Conflict
// errors.Is(err, ErrRequestReused) too.
func (e *ValidationError) Unwrap() []error {
	if e.Conflict {
		return []error{ErrInvalidArgument, ErrRequestReused}
	}
	return []error{ErrInvalidArgument}
}

// Invalid returns a *ValidationError.
func Invalid(field, format string, a ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, a...)}
}

// IsNilPointer reports whether v holds a nil pointer (a typed nil, which a
// type assertion lets through).
func IsNilPointer(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

// requestReused is ErrRequestReused for requestID, with why.
func requestReused(format string, a ...any) error {
	return &ValidationError{Field: "request_id", Reason: fmt.Sprintf(format, a...), Conflict: true}
}

// RequestReused is the error of a lease holder's call whose request_id the job's
// log holds from another attempt of the job. A repeat of a call is a call of the
// same attempt, so this is a new call that reused an old request_id: it is
// refused, and nothing changes.
func RequestReused(requestID string, jobID int64, usedBy, attempt int) error {
	return requestReused("%q was used by attempt %d of job %d; a call of attempt %d needs a request_id of its own",
		requestID, usedBy, jobID, attempt)
}

// ClaimRequestReused is the error of a claim whose request_id a claim by
// another actor (a "worker:<id>") used: a claim's request_id is its worker's.
// Answered as a repeat, the other worker's claims came back empty while jobs
// were ready.
func ClaimRequestReused(requestID, usedBy string) error {
	return requestReused("%q was used by a claim of %s; a claim needs a request_id of its own", requestID, usedBy)
}

// ClaimRequestInLog is the error of a claim whose request_id the log of a job
// it would take holds from another call (a report's): the claim is refused,
// and claims nothing.
func ClaimRequestInLog(requestID string) error {
	return requestReused("%q is in the log of a job this claim would take, from another call; a claim needs a request_id of its own", requestID)
}

// CheckRepeat decides whether a call whose request_id the log of job j (as
// it is now) already holds, in an event of type logged written at attempt
// usedBy, repeats that call (nil: it is answered, and nothing changes) or is a
// new call that reused the request_id (a ValidationError naming request_id:
// refused, and nothing changes). A repeat is a call of the same kind, one of
// ops, whose transitions log that event type, and, for a lease holder's call
// (attempt > 0), of the same attempt. A completion that reused its claim's
// request_id was answered as a repeat of the claim and never applied.
//
// A fail asks for an outcome (FailOps): a permanent one for failed alone, one
// that leaves the retry to the server for whichever the server decides. So a
// permanent fail does not repeat a fail the server retried (its caller was
// told the job failed while it was queued to run again), and a fail that
// leaves the retry to the server repeats a failed event only if the job's
// attempts were spent: with attempts left the server would have retried it,
// and the event is a permanent fail's. (A failed job never changes again, so
// its executions and max_attempts are those the fail saw.)
func CheckRepeat(requestID string, j *Job, logged string, usedBy int, ops []lifecycle.Op, attempt int) error {
	if attempt > 0 && usedBy != attempt {
		return RequestReused(requestID, j.ID, usedBy, attempt)
	}
	for _, t := range lifecycle.Transitions {
		if string(t.Event) != logged || !slices.Contains(ops, t.Op) {
			continue
		}
		if t.Op == lifecycle.OpFail && slices.Contains(ops, lifecycle.OpRetry) && j.Executions < j.MaxAttempts {
			return requestReused("%q was used by a permanent fail of job %d (attempt %d, with %d of %d attempts used); "+
				"a fail that leaves the retry to the server needs a request_id of its own", requestID, j.ID, usedBy, j.Executions, j.MaxAttempts)
		}
		return nil
	}
	call := string(ops[0])
	if len(ops) == 1 && ops[0] == lifecycle.OpFail {
		call = "permanent fail"
	}
	return requestReused("%q was used by another call on job %d (its %s event); a %s needs a request_id of its own",
		requestID, j.ID, logged, call)
}

// RepeatAnswer is what a repeat that CheckRepeat let through answers: the job
// as it is now (j), except that a lease holder's repeat (attempt > 0) never
// passes off a later attempt's lease as its own, as HeartbeatReplay does not.
// A start asks for its attempt's lease, so its repeat answers ErrLeaseLost
// once that attempt holds the job no more and the job has not finished (the
// lease ran out and the job was requeued, or another worker claimed it); its
// caller would otherwise run a job another worker may be running. Any other
// repeat happened as the log says and answers the job, without the lease
// token of the later attempt that holds it now (the fence of another worker).
func RepeatAnswer(j *Job, ops []lifecycle.Op, attempt int) (*Job, error) {
	if attempt <= 0 || (j.Status.Leased() && j.Attempt == attempt) {
		return j, nil
	}
	if slices.Contains(ops, lifecycle.OpStart) && !j.Status.Terminal() {
		return nil, Refused("start", j.ID, j.Status, j.Attempt, ErrLeaseLost)
	}
	if j.Status.Leased() {
		c := *j
		c.LeaseToken = ""
		return &c, nil
	}
	return j, nil
}

// FailOps is what a fail asks for, to tell its repeat (CheckRepeat): a
// permanent fail fails the job; any other leaves the retry to the server,
// which retries it while attempts last and fails it after.
func FailOps(permanent bool) []lifecycle.Op {
	if permanent {
		return []lifecycle.Op{lifecycle.OpFail}
	}
	return []lifecycle.Op{lifecycle.OpRetry, lifecycle.OpFail}
}

// Refused is how every driver words a call the job's state refused (err is
// ErrLeaseLost or ErrInvalidTransition): the operation, the job, and the
// status and attempt the job has now, which tell the caller why.
func Refused(op string, id int64, now lifecycle.Status, attempt int, err error) error {
	return &RefusedError{Op: op, ID: id, Now: now, Attempt: attempt, Err: err}
}

// RefusedError is what Refused makes: errors.Is sees Err through it, and
// errors.As the job's status and attempt when it was refused.
type RefusedError struct {
	Op      string
	ID      int64
	Now     lifecycle.Status
	Attempt int
	Err     error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s job %d (now %s, attempt %d): %v", e.Op, e.ID, e.Now, e.Attempt, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// CanceledDuring reports whether err refused a lease holder's call because
// the job was canceled during its attempt: the holder lost nothing to another
// worker or to the reaper, and the job's outcome is the cancel. Counted as a
// lost lease, it set off the alert on those at every cancel (helper-89).
func CanceledDuring(err error, attempt int) bool {
	var r *RefusedError
	return errors.As(err, &r) && errors.Is(r.Err, ErrLeaseLost) &&
		r.Now == lifecycle.StatusCanceled && r.Attempt == attempt
}

// DLQOnlyFailed is the hint a DLQ requeue of a job that is not failed carries.
const DLQOnlyFailed = "only failed jobs are in the DLQ"

// ReapRefusedError is what JobReapExpired answers, with the jobs it reaped,
// when the database refused the reap of some: those are left as they are.
// Each job's reap is its own change, so one the database refuses (an error
// history grown past what a row holds) cannot hold up the others, as it did
// when one refusal failed the call and the next call met it first again.
type ReapRefusedError struct {
	IDs  []int64 // the jobs left as they are
	Errs []error // the database's answer for each, in the order of IDs
}

func (e *ReapRefusedError) Error() string {
	const shown = 3
	var each []string
	for i, id := range e.IDs[:min(len(e.IDs), shown)] {
		each = append(each, fmt.Sprintf("job %d: %v", id, e.Errs[i]))
	}
	if len(e.IDs) > shown {
		each = append(each, fmt.Sprintf("and %d more", len(e.IDs)-shown))
	}
	return fmt.Sprintf("reap expired leases: the database refused the reap of %d jobs, left as they are: %s", len(e.IDs), strings.Join(each, "; "))
}

func (e *ReapRefusedError) Unwrap() []error { return e.Errs }
