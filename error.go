package drover

import (
	"errors"
	"fmt"
	"time"

	"github.com/drover-dev/drover/driver"
)

// Errors callers branch on with errors.Is.
var (
	ErrNotFound          = driver.ErrNotFound
	ErrLeaseLost         = driver.ErrLeaseLost
	ErrInvalidTransition = driver.ErrInvalidTransition
	ErrInvalidArgument   = driver.ErrInvalidArgument
	// ErrSchemaAhead: MigrateUp found a schema a newer drover migrated.
	ErrSchemaAhead = driver.ErrSchemaAhead
	// ErrSchemaDirty: MigrateUp found the schema's version marked dirty.
	ErrSchemaDirty = driver.ErrSchemaDirty
	// ErrRequestReused: a call's request_id was another call's; it was
	// refused and changed nothing (it also matches ErrInvalidArgument).
	ErrRequestReused = driver.ErrRequestReused
)

// ValidationError names the rejected field and the reason.
type ValidationError = driver.ValidationError

// ErrNoHandler is returned (and recorded on the job) when a worker has no handler
// for a job's kind. The job is retried under its retry policy, never dropped.
var ErrNoHandler = errors.New("no handler")

// permanentError marks an error that must not be retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so that the job fails at once, straight to the DLQ, whatever
// attempts remain.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("failed permanently")
	}
	return &permanentError{err}
}

// snoozeError asks for the job to run again later without using an attempt.
type snoozeError struct{ d time.Duration }

func (e *snoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.d) }

// Snooze, returned by a handler, puts the job back in the queue to run after d.
// A snooze does not count against max_attempts. d is at most MaxSnooze, the
// longest a server accepts from a remote worker; a longer one is cut to it, so a
// handler snoozes alike under NewWorker and NewRemoteWorker.
func Snooze(d time.Duration) error {
	return &snoozeError{min(max(d, 0), MaxSnooze)}
}

// MaxSnooze is the longest snooze: 366 days.
const MaxSnooze = 366 * 24 * time.Hour

// PanicError is the error recorded for a handler that panicked; the job is retried.
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }
