package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/safedelay"
)

// Task is a claimed and started job as the worker protocol hands it out.
type Task struct {
	TaskID         int64           `json:"task_id"`
	Attempt        int             `json:"attempt"`
	LeaseToken     string          `json:"lease_token"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"`
	Kind           string          `json:"kind"`
	Args           json.RawMessage `json:"args"`
	TimeoutSeconds *float64        `json:"timeout_seconds"`
	Queue          string          `json:"queue"`
	Priority       int             `json:"priority"`
	CreatedAt      time.Time       `json:"created_at"`
	MaxAttempts    int             `json:"max_attempts"`
	Executions     int             `json:"executions"`
	// LeaseSeconds is the lease's length: from the claim, and from each
	// heartbeat that renews it. A worker paces its heartbeats by it.
	LeaseSeconds float64 `json:"lease_seconds"`
	// IdempotencyKey and Metadata are the job's, as enqueued (null: none),
	// as a local worker's handler has them: a handler passing the key on to
	// a payment provider must not send none from a remote worker.
	IdempotencyKey *string         `json:"idempotency_key"`
	Metadata       json.RawMessage `json:"metadata"`
	// RunAt, StartedAt, Errors (the earlier attempts') and RetryOf (the job a
	// DLQ requeue copied, null: none) are the job's too, as a local worker's
	// handler has them: a handler that reads the last attempt's error on a
	// retry read none on a remote worker.
	RunAt     time.Time             `json:"run_at"`
	StartedAt *time.Time            `json:"started_at"`
	Errors    []driver.AttemptError `json:"errors"`
	RetryOf   *int64                `json:"retry_of"`
}

func taskOf(j *drover.Job) Task {
	t := Task{
		TaskID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, Kind: j.Kind, Args: j.Args,
		Queue: j.Queue, Priority: j.Priority, CreatedAt: j.CreatedAt, MaxAttempts: j.MaxAttempts, Executions: j.Executions,
		Metadata: j.Metadata, RunAt: j.RunAt, StartedAt: j.StartedAt, Errors: j.Errors, RetryOf: j.RetryOf,
	}
	if t.Errors == nil {
		t.Errors = []driver.AttemptError{}
	}
	if j.IdempotencyKey != "" {
		t.IdempotencyKey = &j.IdempotencyKey
	}
	if j.LeaseExpiresAt != nil {
		t.LeaseExpiresAt = *j.LeaseExpiresAt
	}
	if j.Timeout > 0 {
		s := driver.TimeoutSeconds(j.Timeout)
		t.TimeoutSeconds = &s
	}
	return t
}

type claimRequest struct {
	WorkerID    *string  `json:"worker_id"`
	Queues      []string `json:"queues"`
	TaskID      *int64   `json:"task_id"`
	Limit       *int     `json:"limit"`
	WaitSeconds *float64 `json:"wait_seconds"`
	RequestID   *string  `json:"request_id"`
	// ReplayOnly collects: it answers the tasks a claim of request_id took
	// that the worker still holds, and claims nothing new. A worker that
	// stopped while a claim was under way sends it to give those back.
	ReplayOnly *bool `json:"replay_only"`
}

// waitOf is a long poll's wait_seconds as a duration: none if absent, and
// cut to MaxWait. A longer wait is cut, not refused, as a long poll may end
// early anyway: refused, every claim of a worker that asked for more
// (RemoteConfig.WaitSeconds 61 against the default 60 s, which drover server
// does not let an operator raise) failed, and it ran no job.
func (s *Server) waitOf(seconds *float64) (time.Duration, error) {
	if seconds == nil {
		return 0, nil
	}
	ws := *seconds
	if ws < 0 || math.IsNaN(ws) {
		return 0, driver.Invalid("wait_seconds", "%v, must be 0 or more", ws)
	}
	if ws >= s.cfg.MaxWait.Seconds() {
		return s.cfg.MaxWait, nil
	}
	return time.Duration(ws * float64(time.Second)), nil
}

// maxClaimQueues bounds the queues one task-claim names.
const maxClaimQueues = 100

// taskClaim claims and starts up to limit jobs, or the one task_id names. When
// nothing is ready it holds the request up to wait_seconds, trying again on every
// wake-up of the requested queues and at least once a second (wake-ups are only
// hints; a job whose run_at arrives sends none).
func (s *Server) taskClaim(w http.ResponseWriter, r *http.Request) error {
	arrived := time.Now()
	var req claimRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.WorkerID == nil {
		return driver.Invalid("worker_id", "is required")
	}
	if err := driver.ValidateWorkerID("worker_id", *req.WorkerID); err != nil {
		return err
	}
	if len(req.Queues) == 0 && req.TaskID == nil {
		return driver.Invalid("queues", "name at least one queue")
	}
	if len(req.Queues) > maxClaimQueues {
		// Each queue is one statement of the claim: ten thousand names held a
		// database connection for the whole lease, then answered 503.
		return driver.Invalid("queues", "%d names, at most %d", len(req.Queues), maxClaimQueues)
	}
	for _, q := range req.Queues {
		if err := driver.ValidateName("queues", q); err != nil {
			return err
		}
	}
	p := driver.ClaimParams{Queues: req.Queues, Limit: 1, Owner: *req.WorkerID, LeaseDuration: s.cfg.LeaseDuration}
	if req.TaskID != nil {
		if *req.TaskID < 1 {
			return driver.Invalid("task_id", "%d is not a job id", *req.TaskID)
		}
		p.ID = *req.TaskID
	}
	if req.RequestID != nil {
		// A claim repeated with its request_id (its answer was lost) answers the
		// tasks the first one claimed that the worker still holds, and claims
		// no others: a lost answer then costs no lease and no execution.
		if err := checkRequestID(*req.RequestID); err != nil {
			return err
		}
		p.RequestID = *req.RequestID
	}
	if req.ReplayOnly != nil && *req.ReplayOnly {
		if p.RequestID == "" {
			return driver.Invalid("request_id", "is required with replay_only: it names the claim to collect")
		}
		if req.WaitSeconds != nil && *req.WaitSeconds != 0 {
			return driver.Invalid("wait_seconds", "%v, must be 0 with replay_only: a collect answers at once", *req.WaitSeconds)
		}
		p.ReplayOnly = true
	}
	if req.Limit != nil {
		if *req.Limit < 1 || *req.Limit > 100 {
			return driver.Invalid("limit", "%d, must be 1 to 100", *req.Limit)
		}
		p.Limit = *req.Limit
	}
	wait, err := s.waitOf(req.WaitSeconds)
	if err != nil {
		return err
	}
	ctx := r.Context()
	// A worker that left while its claim ran gets nothing: the claim rolls
	// back before it commits. (The claim itself runs on after the request
	// ends, see claimAndStart.) The server's shutdown ends only the wait of a
	// long poll (shuttingDown), not the request: what a claim took is
	// answered to its worker, still there.
	left := func() bool { return ctx.Err() != nil }
	p.Abandoned = left
	shutdown := shuttingDown(ctx)
	if p.ID != 0 && len(req.Queues) > 0 {
		// A worker that names its queues has handlers for those: a job of
		// another queue is not claimable by it, like a job that is not ready.
		// (A job's queue never changes, so this read cannot go stale.)
		j, err := s.drv.JobGet(ctx, p.ID)
		if errors.Is(err, driver.ErrNotFound) || (err == nil && !slices.Contains(req.Queues, j.Queue)) {
			writeJSON(w, http.StatusOK, claimAnswer{Tasks: []Task{}})
			return nil
		}
		if err != nil {
			return err
		}
	}
	deadline := time.Now().Add(wait)
	var wake <-chan struct{}
	if wait > 0 && p.ID == 0 {
		var cancel func()
		wake, cancel = s.wake.subscribe(req.Queues)
		defer cancel()
	}
	// A claim cut short (the worker went away, or the server is shutting
	// down and ended the long poll) answers no tasks, in the answer's shape:
	// a worker still there must not get a 200 without a body.
	noTasks := func() error {
		writeJSON(w, http.StatusOK, claimAnswer{Tasks: []Task{}})
		return nil
	}
	for first := true; ; first = false {
		if ctx.Err() != nil {
			return noTasks() // claim nothing the worker may not receive
		}
		if !first {
			// Once the server is shutting down no further claim begins (the
			// wait's select may have picked a wake-up). The first always
			// runs: a resend of a claim whose answer was lost is answered
			// its tasks, which "no tasks" would leave leased to nobody.
			select {
			case <-shutdown:
				return noTasks()
			default:
			}
		}
		// How long after the request arrived this claim began, on this
		// server's clock: the worker adds it to when it sent the request for
		// the earliest its lease may have begun, where the answer's arrival
		// could be any time later (see claimAnswer).
		after := time.Since(arrived)
		tasks, replayed, gone, err := s.claimOrGiveBack(r, p, left, p.RequestID == "" || p.ReplayOnly)
		remaining := time.Until(deadline)
		if err == nil && !gone && len(tasks) == 0 && (wake == nil || remaining <= 0) && p.RequestID != "" && !p.ReplayOnly {
			// About to answer none: close the request_id (a collect), so that
			// a late copy of this request (a proxy's resend) claims nothing
			// for a worker that has moved on. Those jobs sat leased to nobody
			// until the lease ran out, which cost a started job an execution.
			// A copy that claimed meanwhile is answered its tasks, a replay;
			// if this request's worker has left, they are not given back:
			// that copy has answered them, or will (helper-19).
			collect := p
			collect.ReplayOnly = true
			tasks, replayed, gone, err = s.claimOrGiveBack(r, collect, left, false)
		}
		if err != nil {
			return err
		}
		if gone {
			return noTasks()
		}
		if replayed {
			// Taken by the first sending of this request_id, before this one
			// arrived: no later bound to give.
			after = 0
		}
		if len(tasks) > 0 || wake == nil || remaining <= 0 {
			// Once written, the tasks are never given back here: the worker
			// may have read them before its connection went, and a job given
			// back could then run twice at once. A worker that left between
			// the write and its read leaves them to the lease's expiry.
			markReplayed(w, replayed)
			writeJSON(w, http.StatusOK, claimAnswer{Tasks: tasks, ClaimedAfterSeconds: after.Seconds(), Replayed: replayed})
			return nil
		}
		t := time.NewTimer(min(remaining, time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return noTasks()
		case <-shutdown: // the server is shutting down: the long poll ends
			t.Stop()
			return noTasks()
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// claimAnswer is task-claim's answer. ClaimedAfterSeconds is how long after
// the request arrived the claim that took Tasks began (a long poll's wait),
// measured on the server: a worker that adds it to when it sent the request
// has the earliest the tasks' leases may have begun, whenever the answer
// reaches it. (When the answer arrived is no such bound: an answer held up
// on its way made a lease that had expired look fresh.)
//
// Replayed says the tasks are an earlier sending's, answered again to a
// repeat of its request_id: their leases began no later than that sending's
// claim. A worker that resent its claim counts a fresh claim's lease from the
// resend instead (plus ClaimedAfterSeconds), which the answer alone could not
// tell it: a long poll cut by a proxy and resent had the job its resend
// claimed counted from the first sending, taken for expired, and given back.
type claimAnswer struct {
	Tasks               []Task  `json:"tasks"`
	ClaimedAfterSeconds float64 `json:"claimed_after_seconds"`
	Replayed            bool    `json:"replayed"`
}

// claimOrGiveBack claims and starts (claimAndStart), and, if giveBack, gives
// back what a worker that left can no longer receive (gone: answer no tasks).
// The claim and its give-back are counted as work under way, which Close
// waits for.
func (s *Server) claimOrGiveBack(r *http.Request, p driver.ClaimParams, left func() bool, giveBack bool) (tasks []Task, replayed, gone bool, err error) {
	defer s.work.begin()()
	tasks, fresh, replayed, err := s.claimAndStart(r, p)
	if err != nil || len(tasks) == 0 || !left() {
		s.countClaimed(fresh)
		return tasks, replayed, false, err
	}
	// The worker left between the claim's commit and now (before the commit,
	// the claim rolled back: p.Abandoned). Without a request_id it can never
	// receive these, so give them back now (a zero snooze returns the
	// execution) rather than let them sit running until the lease expires and
	// cost an attempt. With one, it may have resent the claim already and been
	// answered these very tasks (a replay): given back, they would be claimed
	// by another worker while it ran them. They are left to the resend, or to
	// the lease's expiry if none comes. A worker's collect's (replay_only) are
	// given back: its worker is stopping and only ever gives them back itself
	// (a collect that timed out left them leased to it, helper-50). The
	// caller says which (giveBack).
	// Given back, they were handed to no worker, and drover_claims_total
	// does not count them: it counted each again when its next worker
	// claimed it, and claims outran completions for good.
	if giveBack {
		s.giveBack(r, tasks)
	} else {
		s.countClaimed(fresh)
	}
	return nil, false, true, nil
}

// countClaimed counts, in drover_claims_total, the tasks a claim took
// (fresh: their queues) and handed to its worker.
func (s *Server) countClaimed(fresh []string) {
	for _, q := range fresh {
		s.metrics.claimed(q)
	}
}

// claimAndStart claims and starts; replayed reports an answer to a repeated
// request_id (tasks an earlier sending claimed), and fresh has the queue of
// each task this call claimed (a replayed task was counted when it was
// claimed), for the caller to count once it knows they are handed out.
func (s *Server) claimAndStart(r *http.Request, p driver.ClaimParams) (tasks []Task, fresh []string, replayed bool, err error) {
	p.Start = true // one statement: claimed and running, two events
	// Not canceled by the worker's departure: a claim canceled mid-statement can
	// still commit (the query was sent) while the call reports the cancel, and
	// its jobs would never be given back. The caller checks the request's context
	// after the claim and gives back what a departed worker cannot receive.
	ctx, cancel := s.detached(r)
	defer cancel()
	jobs, err := s.drv.JobClaim(ctx, p)
	if err != nil {
		return nil, nil, false, err
	}
	tasks = make([]Task, 0, len(jobs))
	for _, j := range jobs {
		replayed = replayed || j.Replayed
		if j.Replayed {
			// Claimed by an earlier sending, maybe at another server set to
			// another lease: renewed here, the lease_seconds answered is the
			// lease's from now, and the worker counts it from its first
			// sending, earlier. Answered 30 s for a lease of 2 s, it paced its
			// heartbeats by 30 and the job ran again beside it (helper-19).
			res, err := s.drv.JobHeartbeat(ctx, driver.HeartbeatParams{FenceParams: driver.FenceParams{
				ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, LeaseDuration: s.cfg.LeaseDuration}})
			switch {
			case errors.Is(err, driver.ErrLeaseLost), errors.Is(err, driver.ErrNotFound):
				continue // reaped or canceled since: no longer the worker's
			case err != nil:
				return nil, fresh, false, err
			case res.CancelRequested:
				continue
			}
			j.LeaseExpiresAt = &res.LeaseExpiresAt
		} else {
			fresh = append(fresh, j.Queue)
		}
		t := taskOf(j)
		t.LeaseSeconds = s.cfg.LeaseDuration.Seconds()
		tasks = append(tasks, t)
	}
	return tasks, fresh, replayed, nil
}

// executions is how many times the task's job ran, counting this run, which is
// what backoff grows with (as in the library worker); snoozes and claims that
// never started do not count. If the job cannot be read, attempt bounds it.
func (s *Server) executions(ctx context.Context, f driver.FenceParams) int {
	if j, err := s.drv.JobGet(ctx, f.ID); err == nil && j.Attempt == f.Attempt && j.Executions > 0 {
		return j.Executions
	}
	return f.Attempt
}

// backoff is Config.Backoff's delay after n executions, kept within 0 to
// drover.MaxBackoff as a library worker keeps it (a negative one put the
// job's run_at before its failure, a huge one parked it until 2318), or
// DefaultBackoff's if it panics: a panic there answered the worker's retry
// report with a 500, and the job waited for its lease's expiry.
func (s *Server) backoff(n int) time.Duration {
	return safedelay.Of(s.cfg.Backoff, drover.DefaultBackoff, n, drover.MaxBackoff, s.log, "executions", n)
}

// detached is a context for database work a request must finish even if its
// client leaves: not canceled with the request, bounded by a lease, and, past
// the shutdown's deadline, canceled with the server's life.
func (s *Server) detached(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.LeaseDuration)
	if life := serverLife(r.Context()); life != nil {
		stop := context.AfterFunc(life, cancel)
		return ctx, func() { stop(); cancel() }
	}
	return ctx, cancel
}

// giveBack snoozes, at once, tasks claimed for a worker that left. It is not
// canceled with the server's life: at a shutdown's deadline, the claim it
// follows may have committed (its COMMIT is not canceled either), and the
// give-back is what keeps those jobs from sitting leased to nobody until
// their lease expires (helper-49). A lease bounds it.
func (s *Server) giveBack(r *http.Request, tasks []Task) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.LeaseDuration)
	defer cancel()
	for _, t := range tasks {
		f := driver.FenceParams{ID: t.TaskID, Attempt: t.Attempt, LeaseToken: t.LeaseToken}
		if _, err := s.drv.JobSnooze(ctx, driver.SnoozeParams{FenceParams: f}); err != nil {
			s.log.Warn("could not give back a task claimed for a departed worker; its lease will expire", "task", t.TaskID, "attempt", t.Attempt, "err", err)
		}
	}
}

// checkRequestID refuses a request_id the log cannot keep ("" is none).
func checkRequestID(id string) error {
	if len(id) > driver.MaxRequestIDBytes {
		return driver.Invalid("request_id", "%d bytes, at most %d", len(id), driver.MaxRequestIDBytes)
	}
	return checkText("request_id", id)
}

type fenceRequest struct {
	TaskID     *int64  `json:"task_id"`
	Attempt    *int    `json:"attempt"`
	LeaseToken *string `json:"lease_token"`
}

func (f *fenceRequest) fence() (driver.FenceParams, error) {
	switch {
	case f.TaskID == nil:
		return driver.FenceParams{}, driver.Invalid("task_id", "is required (a positive integer)")
	case *f.TaskID < 1:
		return driver.FenceParams{}, driver.Invalid("task_id", "%d, must be a positive integer", *f.TaskID)
	case f.Attempt == nil:
		return driver.FenceParams{}, driver.Invalid("attempt", "is required (the attempt the claim returned)")
	case *f.Attempt < 1:
		return driver.FenceParams{}, driver.Invalid("attempt", "%d is not an attempt a claim returned", *f.Attempt)
	case *f.Attempt > maxInt32:
		return driver.FenceParams{}, driver.Invalid("attempt", "%d is not an attempt a claim returned", *f.Attempt)
	case f.LeaseToken == nil || *f.LeaseToken == "":
		return driver.FenceParams{}, driver.Invalid("lease_token", "is required (the token the claim returned)")
	}
	return driver.FenceParams{ID: *f.TaskID, Attempt: *f.Attempt, LeaseToken: *f.LeaseToken}, nil
}

// lostLease reports whether err refused f's holder because it lost its lease
// (drover_lease_lost_total), not because its job was canceled during its
// attempt: a canceled job's refusals are not counted (helper-89).
func lostLease(err error, f driver.FenceParams) bool {
	return errors.Is(err, driver.ErrLeaseLost) && !driver.CanceledDuring(err, f.Attempt)
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	var req fenceRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	f, err := req.fence()
	if err != nil {
		return err
	}
	f.LeaseDuration = s.cfg.LeaseDuration
	res, err := s.drv.JobHeartbeat(r.Context(), driver.HeartbeatParams{FenceParams: f})
	if err != nil {
		if lostLease(err, f) {
			s.metrics.leaseLost()
		}
		return err
	}
	// lease_seconds, as a claim's answer has it, lets a worker whose clock
	// differs from the database's time its next heartbeat without reading
	// lease_expires_at against its own clock.
	var expires *time.Time
	var seconds *float64
	if !res.LeaseExpiresAt.IsZero() {
		expires = &res.LeaseExpiresAt
		sec := s.cfg.LeaseDuration.Seconds()
		seconds = &sec
	}
	writeJSON(w, http.StatusOK, map[string]any{"lease_expires_at": expires, "lease_seconds": seconds, "cancel_requested": res.CancelRequested})
	return nil
}

type cancelsRequest struct {
	WaitSeconds *float64 `json:"wait_seconds"`
}

// taskCancels answers the ids of the jobs canceled after a claim while it
// waits (up to wait_seconds, cut to MaxWait), as soon as there is one, or
// none when the wait ends: a remote worker that runs one of them checks its
// lease at once, and its handler stops, where its next heartbeat may be ten
// seconds away. It is a pointer, as every wake-up: a cancel made between two
// of a worker's long polls, or on a replica whose wake-ups do not reach this
// server (SQLite's reach only its own process), is heard at the heartbeat.
func (s *Server) taskCancels(w http.ResponseWriter, r *http.Request) error {
	var req cancelsRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	wait, err := s.waitOf(req.WaitSeconds)
	if err != nil {
		return err
	}
	canceled, stop := s.wake.subscribeCanceled()
	defer stop()
	ids := []int64{}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case id := <-canceled:
		ids = append(ids, id)
		for more := true; more; { // and those canceled with it
			select {
			case id := <-canceled:
				if !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			default:
				more = false
			}
		}
	case <-t.C:
	case <-r.Context().Done():
	case <-shuttingDown(r.Context()):
	case <-s.wake.ctx.Done(): // Server.Close
	}
	writeJSON(w, http.StatusOK, map[string]any{"task_ids": ids})
	return nil
}

type completeRequest struct {
	fenceRequest
	Status        *string         `json:"status"`
	Output        json.RawMessage `json:"output"`
	Error         *string         `json:"error"`
	Stack         *string         `json:"stack"`
	SnoozeSeconds *float64        `json:"snooze_seconds"`
	// RetryAfterSeconds, with retry, is the least delay before the job runs
	// again, whatever the server's backoff says: a worker that abandoned a
	// handler still running asks for its lease's length.
	RetryAfterSeconds *float64 `json:"retry_after_seconds"`
	RequestID         *string  `json:"request_id"`
}

// taskComplete records a worker's outcome: succeeded (with output), failed (a
// permanent failure: straight to the DLQ) or retry (the server picks the backoff,
// and the attempt budget decides between retry and DLQ). snooze_seconds with
// retry runs the job again later without using an attempt.
func (s *Server) taskComplete(w http.ResponseWriter, r *http.Request) error {
	var req completeRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	f, err := req.fence()
	if err != nil {
		return err
	}
	if req.RequestID != nil {
		if err := checkRequestID(*req.RequestID); err != nil {
			return err
		}
		f.RequestID = *req.RequestID
	}
	if req.Status == nil {
		return driver.Invalid("status", `is required: "succeeded", "failed" or "retry"`)
	}
	msg, stack := "", ""
	if req.Error != nil {
		msg = cleanText(*req.Error)
	}
	if req.Stack != nil {
		stack = cleanText(*req.Stack)
	}
	if req.SnoozeSeconds != nil && *req.Status != "retry" {
		return driver.Invalid("snooze_seconds", `goes with status "retry" only`)
	}
	if req.RetryAfterSeconds != nil && (*req.Status != "retry" || req.SnoozeSeconds != nil) {
		return driver.Invalid("retry_after_seconds", `goes with status "retry" only, without snooze_seconds`)
	}
	// The report runs to its end even if its worker leaves, and is counted
	// in drover_completions_total here, once applied: canceled with the
	// request, a report whose COMMIT was under way could apply while the
	// call answered the cancel, and the worker's resend is a replay, counted
	// nowhere (a replay is not counted again), so its outcome was counted by
	// no replica. The worker's resend of its request_id is answered it.
	ctx, cancel := s.detached(r)
	defer cancel()
	var job *drover.Job
	switch *req.Status {
	case "succeeded":
		if req.Error != nil {
			return driver.Invalid("error", `must be absent when status is "succeeded"`)
		}
		if req.Stack != nil {
			// Not dropped in silence: a stack goes with an error.
			return driver.Invalid("stack", `must be absent when status is "succeeded"`)
		}
		size, cerr := driver.CheckJSONSize("output", req.Output)
		if cerr != nil {
			return cerr
		}
		if size > s.cfg.MaxPayloadBytes {
			// As args and metadata are bounded: a result is kept with its job.
			return &driver.ValidationError{Field: "output", TooLarge: true,
				Reason: fmt.Sprintf("%s, at most %d", driver.SizeText(len(req.Output), size), s.cfg.MaxPayloadBytes)}
		}
		output := req.Output
		if len(output) == 0 {
			output = json.RawMessage("null")
		}
		job, err = s.drv.JobComplete(ctx, driver.CompleteParams{FenceParams: f, Result: output})
	case "failed", "retry":
		if msg == "" {
			return driver.Invalid("error", "is required when status is %q", *req.Status)
		}
		if len(req.Output) > 0 && string(req.Output) != "null" {
			return driver.Invalid("output", `goes with status "succeeded" only`)
		}
		if req.SnoozeSeconds != nil {
			d := *req.SnoozeSeconds
			if d < 0 || math.IsNaN(d) || d > 366*24*3600 {
				return driver.Invalid("snooze_seconds", "%v, must be 0 to a year", d)
			}
			job, err = s.drv.JobSnooze(ctx, driver.SnoozeParams{FenceParams: f, Delay: time.Duration(d * float64(time.Second))})
			break
		}
		delay := s.backoff(s.executions(ctx, f))
		if req.RetryAfterSeconds != nil {
			d := *req.RetryAfterSeconds
			if d < 0 || math.IsNaN(d) || d > 366*24*3600 {
				return driver.Invalid("retry_after_seconds", "%v, must be 0 to a year", d)
			}
			delay = max(delay, time.Duration(d*float64(time.Second)))
		}
		job, err = s.drv.JobFail(ctx, driver.FailParams{
			FenceParams: f, Error: msg, Stack: stack, Permanent: *req.Status == "failed", RetryDelay: delay,
		})
	default:
		return driver.Invalid("status", `%q, want "succeeded", "failed" or "retry"`, *req.Status)
	}
	if err != nil {
		if lostLease(err, f) {
			s.metrics.leaseLost()
		}
		return err
	}
	if !job.Replayed {
		s.metrics.finished(job, *req.Status, req.SnoozeSeconds != nil)
	}
	markReplayed(w, job.Replayed)
	writeJSON(w, http.StatusOK, job)
	return nil
}
