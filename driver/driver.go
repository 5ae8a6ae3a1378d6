// Package driver is the storage seam of Drover: one interface, implemented by
// pgdriver (PostgreSQL through pgx v5) and sqlitedriver (embedded SQLite), and
// checked by one conformance suite (drivertest).
//
// Every state change is one guarded statement or transaction: the WHERE clause
// names the expected status and, for lease-holder calls, the attempt and
// lease_token. If the guard does not match, nothing changes and the call returns
// ErrLeaseLost (or ErrInvalidTransition for operator calls, ErrNotFound if the row
// does not exist). Every accepted transition bumps rev by one and appends one event
// whose seq is the new rev. A heartbeat bumps rev but appends no event, unless it
// carries a RequestID: then it logs a "heartbeat" event, which is what lets a
// repeat of it be recognised.
//
// request_id: a transition that carries a RequestID which this job's log already
// holds is not applied again: the driver returns the job as it is now with
// Replayed = true, and rev and attempt do not move (but a lease holder's
// repeat is never handed a later attempt's lease: RepeatAnswer). A RequestID names one call:
// a repeat is a call of the same kind asking for the outcome the log holds (the
// event the log holds it in is one the call writes: a permanent fail does not
// repeat a fail the server retried), and a lease holder's call is a repeat only
// at the attempt that logged the RequestID. Any other call with it is refused with a
// *ValidationError on request_id (CheckRepeat, RequestReused) and changes
// nothing. A claim's RequestID is its owner's (ClaimRequestReused).
//
// Time: the database clock decides leases and run_at (now() in PostgreSQL; the
// process clock in SQLite, which has no server). Params with a Now field use it
// instead when set, so tests can move time without sleeping.
//
// Stability: this package is a deliberate public seam for driver authors. It may
// change between minor versions until 1.0.
package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/drover-dev/drover/lifecycle"
)

// Driver stores jobs and their events and implements the lifecycle atomically.
type Driver interface {
	// Name is "postgres" or "sqlite".
	Name() string

	// MigrateUp applies all pending migrations. Safe to call concurrently.
	MigrateUp(ctx context.Context) error
	// MigrateStatus reports the applied version and the available ones.
	MigrateStatus(ctx context.Context) (MigrationStatus, error)

	// JobInsertMany inserts jobs (queued, or pending when WorkflowRunID is set) in one
	// transaction. A job whose IdempotencyKey exists already is not inserted: its
	// result is the existing job with Existing = true. Results are in input order.
	// Params must be validated by the caller (ValidateInsert). The subscribers of
	// each queue that got a job claimable now are woken once the jobs are
	// committed, best effort, possibly after JobInsertMany returns.
	JobInsertMany(ctx context.Context, params []InsertParams) ([]InsertResult, error)
	// JobInsertManyTx is JobInsertMany inside the caller's transaction (a pgx.Tx for
	// pgdriver, a *sql.Tx for sqlitedriver): the jobs exist iff it commits.
	JobInsertManyTx(ctx context.Context, tx any, params []InsertParams) ([]InsertResult, error)

	JobGet(ctx context.Context, id int64) (*Job, error)
	// JobList returns jobs matching the filters, ordered by id (descending unless
	// Ascending), at most Limit (default 100), starting after AfterID when set.
	JobList(ctx context.Context, params ListParams) ([]*Job, error)
	// JobEvents returns the job's events ordered by seq.
	JobEvents(ctx context.Context, id int64) ([]lifecycle.Event, error)

	// JobClaim moves up to Limit claimable jobs to claimed under a fresh lease:
	// queued jobs with run_at <= now, and stalled jobs (whose run_at is that of a
	// past claim, and which both drivers' reapers requeue in the transaction that
	// stalls them, so claims by queue need not look for one with a later run_at),
	// in unpaused Queues, ordered by priority, run_at, id; or, when ID is set, that
	// one job if it is claimable. Each
	// gets attempt+1, a new random lease_token, owner = Owner and lease_expires_at =
	// now + LeaseDuration. Concurrent claimers never receive the same job.
	JobClaim(ctx context.Context, params ClaimParams) ([]*Job, error)
	// JobStart moves claimed → running (executions+1, started_at = now, lease extended).
	JobStart(ctx context.Context, params FenceParams) (*Job, error)
	// JobStartMany applies many starts in one transaction; each is fenced on its own
	// and its outcome is reported in input order.
	JobStartMany(ctx context.Context, params []FenceParams) []JobOutcome
	// JobUnclaim moves claimed → queued, clearing the lease; executions are untouched.
	JobUnclaim(ctx context.Context, params FenceParams) (*Job, error)
	// JobHeartbeat extends the lease of a claimed or running job to Now +
	// LeaseDuration, and never moves its end earlier: a holder whose heartbeat
	// committed but whose answer was lost still holds the lease until the end it
	// last heard of, which is what it times its give-up by. (A running job with a
	// timeout is not extended past its start + timeout + one lease.) If the job
	// was canceled during this attempt it returns CancelRequested = true and no
	// error.
	JobHeartbeat(ctx context.Context, params HeartbeatParams) (HeartbeatResult, error)
	// JobComplete moves running → succeeded with Result (nil is stored as JSON null).
	JobComplete(ctx context.Context, params CompleteParams) (*Job, error)
	// JobCompleteMany applies many completions in one transaction; each is fenced on
	// its own and its outcome (job or error) is reported in input order.
	JobCompleteMany(ctx context.Context, params []CompleteParams) []JobOutcome
	// JobCompleteManyErrs is JobCompleteMany for a caller that needs only each
	// completion's error, as the worker does: nil for a job that completed or
	// whose completion is a replay. Completed jobs are not read back.
	JobCompleteManyErrs(ctx context.Context, params []CompleteParams) []error
	// JobFail records Error in the job's error history and then, in one statement:
	// running → queued at RetryAt, or now + RetryDelay when RetryAt is zero (event
	// "retried"), if !Permanent and executions < max_attempts; else running → failed
	// with error = Error (event "failed").
	JobFail(ctx context.Context, params FailParams) (*Job, error)
	// JobSnooze moves running → queued at RunAt (now + Delay when RunAt is zero);
	// the execution is given back
	// (executions-1) so a snooze does not use up max_attempts.
	JobSnooze(ctx context.Context, params SnoozeParams) (*Job, error)
	// JobCancel moves any non-terminal job to canceled, clearing its lease.
	// Terminal → ErrInvalidTransition. Once it commits, a job that has been
	// claimed (attempt > 0) is named to the wake-up subscribers
	// (CanceledWakeup), so that a worker running it stops it at once.
	JobCancel(ctx context.Context, params CancelParams) (*Job, error)

	// JobReapExpired is the lease reaper: every claimed or running job whose
	// lease_expires_at < now goes to stalled (event "stalled") and, in the same
	// transaction, to queued at now (event "requeued"), or to failed (event
	// "failed") when it was running and its executions reached max_attempts. A
	// running attempt that stalled is recorded in the error history. A job
	// whose reap the database refuses (a write it cannot take, such as an
	// error history past what a row holds) is left as it is and holds up no
	// other: the call answers the jobs it reaped together with a
	// *ReapRefusedError naming the ones it left.
	JobReapExpired(ctx context.Context, params ReapParams) ([]*Job, error)
	// JobDeleteFinished deletes terminal jobs (and their events) finished before
	// the params' cutoff (see DeleteFinishedParams), at most Limit per call.
	// Returns how many were deleted.
	JobDeleteFinished(ctx context.Context, params DeleteFinishedParams) (int, error)
	// JobDLQRequeue enqueues a new queued job copying the failed job ID's kind,
	// args, queue, priority, max_attempts, timeout and metadata, with retry_of = ID.
	// The failed row is unchanged. A job that is not failed → ErrInvalidTransition.
	// A failed job is requeued at most once: once a job with retry_of = ID
	// exists, a repeat (a retried request, a second operator) creates nothing
	// and returns that job, with Replayed = true, whatever its status now.
	JobDLQRequeue(ctx context.Context, params DLQRequeueParams) (*Job, error)
	// JobDLQPurge deletes failed jobs (optionally of one queue); returns the count.
	// It deletes those that were failed when it began: a job that fails while
	// it runs is kept.
	JobDLQPurge(ctx context.Context, params DLQPurgeParams) (int, error)

	// QueueList returns every queue that has jobs or was paused, with counts per status.
	QueueList(ctx context.Context) ([]QueueInfo, error)
	// QueuePause / QueueResume stop / restart claims from a queue (jobs stay queued).
	QueuePause(ctx context.Context, name string) error
	QueueResume(ctx context.Context, name string) error
	// QueuesReady returns the queues that have claimable jobs now.
	QueuesReady(ctx context.Context, now *time.Time) ([]string, error)

	// LeaderAttemptElect makes ID the leader, under Token, if there is none or
	// the lease expired, or extends the lease if ID leads already under the
	// same Token; reports whether ID leads under Token.
	LeaderAttemptElect(ctx context.Context, params LeaderParams) (bool, error)
	// LeaderResign gives up leadership if id holds it under token.
	LeaderResign(ctx context.Context, id, token string) error
	// LeaderGet returns the current leader (ErrNotFound if none ever was).
	LeaderGet(ctx context.Context) (Leader, error)

	// WakeupPublish tells listeners that the queues may have claimable jobs.
	// Wake-ups are only pointers: losing or repeating one never loses or doubles work.
	WakeupPublish(ctx context.Context, queues []string) error
	// WakeupSubscribe returns a channel that receives queue names until ctx ends
	// or the driver is closed, and is then closed. It also receives, from
	// JobCancel, the CanceledWakeup of a job canceled after a claim, which
	// names no queue.
	// Delivery is best effort; receivers must also poll.
	WakeupSubscribe(ctx context.Context) (<-chan string, error)

	// Ping checks the database is reachable.
	Ping(ctx context.Context) error
	Close() error
}

// Job is a job row. Times are UTC.
type Job struct {
	ID             int64            `json:"id"`
	Kind           string           `json:"kind"`
	Queue          string           `json:"queue"`
	Status         lifecycle.Status `json:"status"`
	Args           json.RawMessage  `json:"args"`
	Metadata       json.RawMessage  `json:"metadata,omitempty"`
	Priority       int              `json:"priority"`
	RunAt          time.Time        `json:"run_at"`
	Attempt        int              `json:"attempt"`    // claims so far; half of the fence
	Executions     int              `json:"executions"` // claims that reached running, net of snoozes
	MaxAttempts    int              `json:"max_attempts"`
	Timeout        time.Duration    `json:"-"` // 0: the worker's default
	IdempotencyKey string           `json:"idempotency_key,omitempty"`
	Owner          string           `json:"owner,omitempty"`
	LeaseToken     string           `json:"-"`
	LeaseExpiresAt *time.Time       `json:"lease_expires_at,omitempty"`
	Result         json.RawMessage  `json:"result"`
	Error          string           `json:"error,omitempty"`
	Errors         []AttemptError   `json:"errors"`
	CreatedAt      time.Time        `json:"created_at"`
	StartedAt      *time.Time       `json:"started_at"`
	FinishedAt     *time.Time       `json:"finished_at"`
	Rev            int64            `json:"rev"`
	RetryOf        *int64           `json:"retry_of,omitempty"`
	WorkflowRunID  *int64           `json:"workflow_run_id,omitempty"`
	WorkflowNode   string           `json:"workflow_node,omitempty"`
	Replayed       bool             `json:"-"` // answer to a repeated request_id, or to a repeated DLQ requeue
}

// State returns the fields the lifecycle invariants talk about.
func (j *Job) State() lifecycle.State {
	return lifecycle.State{
		Status:      j.Status,
		HasOwner:    j.Owner != "",
		HasLease:    j.LeaseToken != "" || j.LeaseExpiresAt != nil,
		HasResult:   j.Result != nil,
		HasError:    j.Error != "",
		Attempt:     j.Attempt,
		Executions:  j.Executions,
		MaxAttempts: j.MaxAttempts,
	}
}

// AttemptError is one entry of a job's error history.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
	Stack   string    `json:"stack,omitempty"`
}

// DecodeAttemptErrors reads a stored error history: a JSON array, or empty or
// null for none. It never returns nil. Most jobs have none, and a claim reads
// hundreds at once: "[]" is answered without the JSON decoder.
//
// It takes the column as either type its driver scans it into, so that the
// common case converts nothing.
func DecodeAttemptErrors[T string | []byte](b T) ([]AttemptError, error) {
	if len(b) == 0 || string(b) == "[]" || string(b) == "null" {
		return []AttemptError{}, nil
	}
	var errs []AttemptError
	if err := json.Unmarshal([]byte(b), &errs); err != nil {
		return nil, err
	}
	if errs == nil {
		errs = []AttemptError{}
	}
	return errs, nil
}

// InsertParams describes a job to enqueue. Zero values are defaults only where
// ValidateInsert fills them in; drivers store what they are given.
type InsertParams struct {
	Kind           string
	Args           json.RawMessage // a JSON object
	Queue          string
	Priority       int
	RunAt          *time.Time // nil: now
	MaxAttempts    int
	Timeout        time.Duration // 0: worker default
	IdempotencyKey string        // "": none
	Metadata       json.RawMessage
	RetryOf        *int64
	WorkflowRunID  *int64 // set: the job starts pending
	WorkflowNode   string
	Actor          string
}

// InsertResult is one job of JobInsertMany.
type InsertResult struct {
	Job      *Job
	Existing bool // the idempotency key was seen: Job is the earlier job
}

// ListParams filters JobList. Empty filters do not filter; Limit is a page.
type ListParams struct {
	Statuses  []lifecycle.Status
	Queue     string
	Kind      string
	AfterID   int64 // cursor: ids after this one in the listing order
	Limit     int   // most jobs answered; 0: 100. Page on with AfterID = the last one's ID
	Ascending bool
	// MaxBytes, above 0, also ends the listing once the jobs read weigh more
	// than MaxBytes (JobBytes: args, metadata, result and errors), as soon as
	// there are two: the last job answered is then the one that went over,
	// so a caller that keeps the jobs within MaxBytes (the first always; see
	// PageFit) and has one left over knows more follow. It bounds what a
	// listing holds when jobs are large: a thousand jobs of 1 MiB args were a
	// gigabyte. 0: no bound but Limit.
	MaxBytes int
}

// ClaimParams selects jobs to claim.
type ClaimParams struct {
	Queues        []string
	ID            int64 // claim this job only
	Limit         int
	Owner         string        // worker id (driver.ValidateWorkerID); required
	LeaseDuration time.Duration // 0 or less: DefaultLease (30s), as a heartbeat's
	// RequestID names the claim: a repeat returns the jobs the first call
	// claimed that Owner still holds under that claim (maybe none), and
	// claims no more. A call that claimed nothing records nothing, so a
	// repeat of it claims as a first call would; a caller that answers no
	// jobs closes it with ReplayOnly (the server does, before it answers no
	// tasks).
	RequestID string
	// ReplayOnly, with RequestID, only collects: it answers the jobs a claim
	// of that RequestID took that Owner still holds (maybe none), and if no
	// claim of it was made, claims nothing and closes the RequestID for a
	// day: a claim with it that runs later answers no jobs. A worker that
	// stopped while its claim was under way sends it, to give back what the
	// claim may have taken, without taking more, and so that a sending of it
	// still on its way takes nothing.
	ReplayOnly bool
	// Start also starts each claimed job in the same statement (claimed → running:
	// executions+1, started_at; events "claimed" then "started"), for a worker that
	// runs what it claims at once. One row version instead of two.
	Start bool
	Now   *time.Time
	// Abandoned, when set, is asked once the claim has taken its jobs and
	// before it commits: true (the caller that would receive them is gone)
	// rolls the claim back, and JobClaim answers no jobs. A claim given back
	// after its commit instead raced a resend of its request_id, which could
	// be answered the very jobs the give-back then queued again.
	Abandoned func() bool
}

// FenceParams identifies the current attempt of a job, as only its lease holder knows it.
type FenceParams struct {
	ID            int64
	Attempt       int
	LeaseToken    string
	RequestID     string
	LeaseDuration time.Duration // JobStart: new lease length (0 keeps the current expiry); heartbeat: the extension (0: 30s)
	Now           *time.Time
}

// HeartbeatParams extends a lease.
type HeartbeatParams struct {
	FenceParams
}

// HeartbeatResult answers a heartbeat.
type HeartbeatResult struct {
	LeaseExpiresAt  time.Time
	CancelRequested bool
}

// CanonicalToken returns a lease token in the one spelling the drivers store
// and compare: lower-case 8-4-4-4-12. A lease token is a UUID, taken in any
// form uuid.Parse reads (capitals, braces, urn:uuid:); one that is no UUID is
// returned as given, and matches no lease.
func CanonicalToken(s string) string {
	u, err := uuid.Parse(s)
	if err != nil {
		return s
	}
	return u.String()
}

// sameToken compares lease tokens as UUIDs, as the drivers' fences do (any
// case, any of the forms uuid.Parse reads).
func sameToken(a, b string) bool {
	ua, errA := uuid.Parse(a)
	ub, errB := uuid.Parse(b)
	return errA == nil && errB == nil && ua == ub
}

// HeartbeatReplay answers a repeated heartbeat (its request_id is in the log)
// from the job as it is now: the lease the fence holds, if it still holds
// one; cancel requested if the job was canceled at the fence's attempt; else
// ErrLeaseLost. The job's current lease may be a later attempt's, which a
// repeat must not pass off as the caller's.
func HeartbeatReplay(j *Job, f FenceParams) (HeartbeatResult, error) {
	switch {
	case j.Status == lifecycle.StatusCanceled && j.Attempt == f.Attempt:
		return HeartbeatResult{CancelRequested: true}, nil
	case j.Status.Leased() && j.Attempt == f.Attempt && sameToken(j.LeaseToken, f.LeaseToken) && j.LeaseExpiresAt != nil:
		return HeartbeatResult{LeaseExpiresAt: *j.LeaseExpiresAt}, nil
	}
	return HeartbeatResult{}, Refused("heartbeat", j.ID, j.Status, j.Attempt, ErrLeaseLost)
}

// CompleteParams completes a running job.
type CompleteParams struct {
	FenceParams
	Result json.RawMessage
}

// JobOutcome is one result of a batched call (JobStartMany, JobCompleteMany).
type JobOutcome struct {
	Job *Job
	Err error
}

// OutcomeErrs returns the error of each outcome, in order: a batch call's
// answer for a caller that needs only the errors (JobCompleteManyErrs).
func OutcomeErrs(outs []JobOutcome) []error {
	errs := make([]error, len(outs))
	for i, o := range outs {
		errs[i] = o.Err
	}
	return errs
}

// CompleteOutcome is the former name of JobOutcome.
type CompleteOutcome = JobOutcome

// FailParams reports a failed execution.
type FailParams struct {
	FenceParams
	Error      string        // free text: a driver stores it with NULs and bytes that are not UTF-8 replaced (CleanText)
	Stack      string        // as Error
	RetryAt    time.Time     // absolute retry time; zero: now + RetryDelay
	RetryDelay time.Duration // measured on the database clock, so a worker's skewed clock cannot move it
	Permanent  bool
}

// SnoozeParams reschedules a running job without using up an attempt.
type SnoozeParams struct {
	FenceParams
	RunAt time.Time     // absolute; zero: now + Delay
	Delay time.Duration // measured on the database clock
}

// CancelParams cancels a job.
type CancelParams struct {
	ID        int64
	RequestID string
	Actor     string
	Now       *time.Time
}

// ReapParams drives the lease reaper.
type ReapParams struct {
	Limit int
	Now   *time.Time
}

// DeleteFinishedParams drives retention: the jobs finished before Before or,
// when Before is zero, more than OlderThan ago by the database's clock (the one
// that wrote finished_at; a retention age measured on a process's own clock
// would delete early whenever that clock runs ahead). With neither (a zero
// Before and an OlderThan not above zero) the call is refused: it would delete
// every finished job, and free their idempotency keys.
type DeleteFinishedParams struct {
	Before    time.Time
	OlderThan time.Duration
	Limit     int
}

// Check refuses params that name no cutoff.
func (p DeleteFinishedParams) Check() error {
	if p.Before.IsZero() && p.OlderThan <= 0 {
		return Invalid("older_than", "%s with no before: retention needs a positive age or a cutoff time", p.OlderThan)
	}
	return nil
}

// DLQRequeueParams requeues a failed job as a new one.
type DLQRequeueParams struct {
	ID    int64
	Actor string
}

// DLQPurgeParams deletes failed jobs.
type DLQPurgeParams struct {
	Queue string // "": all queues
}

// QueueInfo is a queue with its job counts per status.
type QueueInfo struct {
	Name   string                   `json:"name"`
	Paused bool                     `json:"paused"`
	Counts map[lifecycle.Status]int `json:"counts"`
}

// LeaderParams asks for or extends leadership.
type LeaderParams struct {
	ID string
	// Token tells apart two candidates of one ID (two engines given the same
	// EngineConfig.ID): only the Token that took the lease extends or resigns
	// it. The maintenance engine takes a random one each Run.
	Token string
	TTL   time.Duration
	Now   *time.Time
}

// Leader is the current holder of the leadership lease.
type Leader struct {
	ID        string
	ExpiresAt time.Time
}

// MigrationStatus reports the schema version.
type MigrationStatus struct {
	Current   uint   `json:"current"`   // 0: none applied
	Dirty     bool   `json:"dirty"`     // a migration failed half-way
	Available []uint `json:"available"` // versions shipped with this build
}

// Latest is the newest version this build ships (0 if none).
func (s MigrationStatus) Latest() uint {
	if len(s.Available) == 0 {
		return 0
	}
	return s.Available[len(s.Available)-1]
}

// CheckNotAhead returns ErrSchemaAhead, with both versions, when the database
// is at a version newer than Latest.
func (s MigrationStatus) CheckNotAhead() error {
	if s.Current > s.Latest() {
		hint := ""
		if s.Current >= 1_000_000 { // drover numbers its migrations 1, 2, 3…
			hint = " (or the version table is another tool's: a version like this one is a timestamp)"
		}
		return fmt.Errorf("%w: it is at version %d, this build knows up to %d: run a newer drover%s", ErrSchemaAhead, s.Current, s.Latest(), hint)
	}
	return nil
}

// VersionTableUnreadable is the error of a version table (table) whose row
// cannot be read as drover's (version bigint, dirty boolean): a table of that
// name that another tool made, say. The database's error alone named neither
// the table nor what to do (helper-92). A driver gives it only for an error
// of the table's shape (a missing column, a value of another type), not for
// one of reaching the database.
func VersionTableUnreadable(table string, err error) error {
	return fmt.Errorf("read the schema version from %s: %w (drover's has the columns version bigint and dirty boolean; if another tool made a table of that name, give drover a schema or database of its own)", table, err)
}

// Repairer is a driver that keeps sets derived from the job rows beside them
// (pgdriver: the claimable jobs in drover_ready, the leases in drover_leases)
// and can repair them a step at a time. The maintenance engine's leader calls
// RepairStep once per reconcile period, walking the whole table in id order and
// starting a walk at most once a minute, so a job that became claimable without
// entering its set (written by an older binary during a rolling upgrade, or by a
// bug) is claimed at most a walk and a minute after it is a minute old (pgdriver
// leaves younger jobs to a later walk) instead of never, and a job whose
// expired lease no set row names is reaped as long after instead of never.
type Repairer interface {
	// RepairStep checks up to limit jobs with ids above after and repairs the
	// sets for them. It returns the last id checked, or 0 when it reached the end
	// of the table (the next step starts again from the beginning), and how many
	// jobs it repaired.
	RepairStep(ctx context.Context, after int64, limit int) (next int64, repaired int, err error)
}

// CountFolder is a driver that keeps the job counts QueueList answers as a
// table of counts plus the changes each statement appended since (pgdriver:
// drover_job_counts and drover_job_count_changes, migration 017). The
// maintenance engine's leader calls FoldJobCounts once per reconcile period to
// fold the changes into the counts, so that QueueList reads the changes of about
// one period, not of every statement since the start.
type CountFolder interface {
	// FoldJobCounts moves the changes into the counts; QueueList answers the
	// same before and after it.
	FoldJobCounts(ctx context.Context) error
}
