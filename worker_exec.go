package drover

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/safedelay"
)

// outcome is what a handler produced.
type outcome struct {
	result any
	err    error
	// What the worker knows of how the handler ended, kept apart from err: a
	// user's error whose Is matches every target passed for them.
	abandoned bool // given up on after its grace (see run)
	stopped   bool // its context ended by the worker's hard stop
}

// runTask runs the job to a reported end, on the goroutine that called it,
// which also runs the handler. It frees the job's slot once the handler has
// returned (release), before the outcome is written, and counts the job as
// no longer pending once the outcome is written or given up on (ended). For
// a handler abandoned after TimeoutGrace, the outcome is written by another
// goroutine while the handler goes on, and its slot is freed only when it
// does return (see run). x.group.leaseFrom is when the job's lease began, as
// near as the worker can tell without overestimating it (see produce), and
// x.lease the lease's length: the one the server set for a remote worker,
// else LeaseDuration.
func (x *execution) runTask() {
	w, job, lease := x.w, x.job, x.lease
	began := time.Now()
	leaseFrom := x.group.leaseFrom
	fence := driver.FenceParams{ID: job.ID, Attempt: job.Attempt, LeaseToken: job.LeaseToken}
	log := jobLog{w.log, job}
	interval, margin := w.heartbeatTiming(lease)
	if !began.Before(leaseFrom.Add(lease - margin)) {
		// The answer came too late (held up on its way, or this process was
		// paused): the lease may have run out, and the job be another
		// worker's. Its handler is not started.
		w.giveBack(job, fence, log, x.release, began.Add(lease), 0, "not run: its lease may have expired before its claim's answer arrived",
			"lease", lease, "since_lease_began", began.Sub(leaseFrom).Round(time.Millisecond))
		x.ended()
		return
	}
	if w.draining.Load() {
		// Claimed while the worker was stopping (a claim under way when Stop
		// was called; Stop sets draining before its hard stop): Stop gives
		// such jobs back. Started after the hard stop, its handler's context
		// was already canceled, and a job on its last attempt failed without
		// a run.
		w.giveBack(job, fence, log, x.release, began.Add(lease), 0, "not run: the worker is stopping")
		x.ended()
		return
	}
	if w.abandoned.any() && w.abandoned.holds(job.ID) {
		// A handler of this job that this worker abandoned (it ignored its
		// context past its grace) has not returned yet: the job's retry,
		// due a lease after, ran beside it on a free slot, two runs of one
		// job at once in one process. It goes back for another lease,
		// without using an execution, until that handler has returned.
		w.giveBack(job, fence, log, x.release, began.Add(lease), lease, "not run: a handler of this job that the worker abandoned is still running")
		x.ended()
		return
	}
	x.fence, x.began = fence, began
	x.h = w.cfg.Workers.get(job.Kind)
	timeout := job.Timeout
	if timeout == 0 && x.h != nil {
		timeout = x.h.timeout
	}
	if timeout == 0 {
		timeout = w.cfg.DefaultTimeout
	}
	// The handler's context: canceled with a cause (x.end) by the heartbeat
	// or the hard stop, inside the timeout's, which the jobs of the claim
	// share (claimGroup). Neither is a child of a context every job of the
	// worker shares (the hard stop finds each job in w.running instead):
	// registering with one, and leaving it, took a lock every job took,
	// twice.
	ctx := w.jobsBase
	if timeout > 0 {
		// Counted from when the lease began, as the database counts the
		// timeout that caps it (started_at + timeout + lease): counted from
		// the answer's arrival, a late answer's handler and its grace
		// outlived that cap, and the job was reaped and run again while this
		// worker still ran it.
		ctx = x.group.deadline(timeout)
		x.giveUpAt = leaseFrom.Add(timeout).Add(w.grace(lease))
	}
	ctx, x.cancel = context.WithCancelCause(ctx)
	x.ctx = ctx
	x.graceLease = lease
	// The first heartbeat is due one interval into the lease, which runs from
	// the claim's sending, not from the handler's start.
	x.hbAt = leaseFrom.Add(interval)
	// The timeout, counted from the lease's start, and the grace after it
	// may have run out before the claim's answer arrived: the handler is then
	// not called. It was, after the timer had already reported its attempt
	// abandoned and the job had gone back to run again beside it.
	late := timeout > 0 && !began.Before(x.giveUpAt)
	// In the running set before the timer exists: a hard stop that comes in
	// between moves giveUpAt, which the timer is made with, and a timer
	// already due gives up at once; its done must find x there to remove it.
	w.running.add(x)
	if late {
		x.answered(outcome{err: fmt.Errorf("%w; not started: the claim's answer came %s into the lease",
			timeoutError(timeout), began.Sub(leaseFrom).Round(time.Millisecond))})
		return
	}
	x.mu.Lock() // tick waits for x.timer
	x.timer = time.AfterFunc(x.nextDue(began), x.tick)
	x.mu.Unlock()
	x.run(ctx)
}

// release frees the handler's slot: called once, when the handler has
// returned.
func (x *execution) release() {
	x.slots.running.Add(-1)
	x.slots.signal()
}

// ended counts the job as no longer pending: called once, when its outcome is
// written or given up on.
func (x *execution) ended() {
	x.group.ended()
	x.slots.pending.Add(-1)
	x.slots.signal()
	x.w.jobs.Done()
}

// execChunk is how many executions produce allocates at once.
const execChunk = 64

// execution is one job's run, from its claim to its reported end.
type execution struct {
	w      *Worker
	job    *Job
	h      *kindHandler
	fence  driver.FenceParams
	began  time.Time
	lease  time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	group  *claimGroup
	slots  *queueSlots

	// One timer a job (tick) starts its heartbeat loop, at hbAt, and gives up
	// on a handler that has not returned at giveUpAt: its grace after its
	// context ended, which, for a timeout, is known from the start. Most jobs
	// end before either, and the timer is stopped unfired.
	// stopTimer drops the timer, and finish the handler's context once it
	// read its cause (releaseContext): a job whose success waits for its
	// completion batch holds neither.
	timer      *time.Timer
	mu         sync.Mutex
	hbAt       time.Time // zero once the loop started
	giveUpAt   time.Time // zero: none (no timeout, and the context has not ended)
	hbQuit     chan struct{}
	hbDone     chan struct{}
	hbPoke     chan struct{} // a heartbeat now, please (poke)
	prev, next *execution    // in w.running

	// graceLease is the shortest lease the job was held under, the claim's
	// or one a heartbeat renewed it for (a server set to another lease): the
	// handler's grace is half of it at most (see leased).
	graceLease time.Duration // with mu held

	// Who had the last word, the handler returning (callAnswered) or the
	// worker giving up on it (callAbandoned); only the first of the two
	// happens.
	state     atomic.Int32
	timerDone bool // stopTimer was called

	// The report (see report): a success's result, or its failure.
	result   json.RawMessage // of a success
	failed   *failReport     // nil: a success
	deadline time.Time       // of the report's attempts
}

// failReport is the report of a handler that did not succeed. It is apart
// from execution, which every job held carries until its outcome is written,
// so that a success, the common case, carries none of it.
type failReport struct {
	err     error // the handler's, as reported
	f       failure
	snooze  time.Duration
	snoozed bool
}

// reportErr is the error reported: nil for a success.
func (x *execution) reportErr() error {
	if x.failed == nil {
		return nil
	}
	return x.failed.err
}

const (
	callRunning = iota
	callAnswered
	callAbandoned
)

// run calls the handler, turning a panic into an error with its stack, then
// calls release and writes the outcome (finish). It gives up on a handler that
// does not return within its grace (Worker.grace) after its context ended: the outcome is then
// that it was abandoned, written by the grace timer's goroutine, and the slot
// stays taken until the handler does return, so the queue's concurrency bounds
// the handlers really running: a handler that ignores its context still holds
// whatever it was using, and on a queue whose every slot is taken this worker
// cannot start the job's retry beside it.
//
// ctx is the handler's context, x.ctx as runTask set it: read from x, it
// could already be released (releaseContext) by a grace timer that fired
// before the handler started.
func (x *execution) run(ctx context.Context) {
	if x.h == nil {
		x.answered(outcome{err: fmt.Errorf("%w for kind %q", ErrNoHandler, x.job.Kind)})
		return
	}
	x.call(ctx)
}

// call runs the handler and answers its outcome from a deferred function, so
// that every way a handler ends is answered. A handler that ends the goroutine
// (runtime.Goexit, t.FailNow in a handler, say) has no value and no panic, but
// is over. One that does so and then panics in a deferred function of its own
// has its panic recovered here, yet its goroutine still ends: answered after
// call returned, it was never answered. Without an answer the job would hold
// its slot and lease until its timeout, or for ever.
func (x *execution) call(ctx context.Context) {
	var o outcome
	returned := false
	defer func() {
		if r := recover(); r != nil {
			o = outcome{err: &PanicError{Value: r, Stack: string(debug.Stack())}}
		} else if !returned {
			o = outcome{err: errHandlerGoexit}
		}
		x.answered(o)
	}()
	res, err := x.h.run(ctx, x.job)
	returned = true
	o = outcome{result: res, err: err}
}

// answered takes the handler's outcome o: it frees the slot and, unless the
// handler was given up on already, writes o.
func (x *execution) answered(o outcome) {
	if !x.state.CompareAndSwap(callRunning, callAnswered) {
		x.w.abandoned.remove(x.job.ID)
		x.release() // given up on: the outcome was written, the slot waited for this
		return
	}
	x.release()
	x.finish(o)
}

// end cancels the handler's context with cause, and gives the handler its
// grace from now to return, but no later than by if by is set (the end of a
// lease the heartbeat could not renew).
//
// Once finish released the context (releaseContext), the handler has returned
// or was given up on after its context ended, and there is nothing to end.
func (x *execution) end(cause error, by time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cancel == nil {
		return
	}
	x.cancel(cause)
	now := time.Now()
	at := now.Add(x.w.grace(x.graceLease))
	if !by.IsZero() && by.Before(at) {
		at = by
	}
	if !x.timerDone && (x.giveUpAt.IsZero() || at.Before(x.giveUpAt)) {
		x.giveUpAt = at
		if x.timer != nil { // else runTask makes it with giveUpAt
			x.timer.Reset(x.nextDue(now))
		}
	}
}

// nextDue is how long from now until the timer is next due; with x.mu held,
// or before the timer exists.
func (x *execution) nextDue(now time.Time) time.Duration {
	next := x.hbAt
	if next.IsZero() || (!x.giveUpAt.IsZero() && x.giveUpAt.Before(next)) {
		next = x.giveUpAt
	}
	if next.IsZero() {
		return maxTimer // nothing left due; never reached
	}
	return next.Sub(now)
}

// maxTimer stands for "never" as a timer's duration.
const maxTimer = time.Duration(1<<63 - 1)

// tick is the timer's: it starts the heartbeat loop, or gives up on the
// handler, whichever is due, and sets the timer for the other.
func (x *execution) tick() {
	now := time.Now()
	x.mu.Lock()
	if x.timerDone {
		x.mu.Unlock()
		return
	}
	startHB := !x.hbAt.IsZero() && !now.Before(x.hbAt)
	if startHB {
		x.hbAt = time.Time{}
		x.hbQuit, x.hbDone, x.hbPoke = make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
	}
	giveUp := !x.giveUpAt.IsZero() && !now.Before(x.giveUpAt)
	if giveUp {
		x.giveUpAt = time.Time{}
	}
	if !x.hbAt.IsZero() || !x.giveUpAt.IsZero() {
		x.timer.Reset(x.nextDue(now))
	}
	quit, done, poke := x.hbQuit, x.hbDone, x.hbPoke
	x.mu.Unlock()
	if giveUp {
		if startHB {
			go x.abandon() // reports: the loop below is this goroutine's
		} else {
			x.abandon()
		}
	}
	if startHB {
		defer close(done)
		x.w.heartbeat(jobLog{x.w.log, x.job}, x.fence, x.end, x.leased, quit, poke, x.group.leaseFrom, x.lease)
	}
}

// poke has the job's lease checked now, not at its next heartbeat: the job
// was canceled (runningJobs.poke). The heartbeat loop, started now if it had
// not started yet, sends a heartbeat at once, whose answer says whether the
// job was canceled, and ends the handler if it was. A poke of a job that was
// not canceled costs a heartbeat.
func (x *execution) poke() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.timerDone {
		return
	}
	if !x.hbAt.IsZero() { // the loop has not started: start it now
		now := time.Now()
		x.hbAt = now
		if x.timer != nil { // else runTask makes it with hbAt
			x.timer.Reset(x.nextDue(now))
		}
		return
	}
	select {
	case x.hbPoke <- struct{}{}:
	default: // one is asked for already
	}
}

// stopTimer stops the timer, and the heartbeat loop if it started, and waits
// for the loop to end.
func (x *execution) stopTimer() {
	x.mu.Lock()
	x.timerDone = true
	t := x.timer
	x.timer = nil // tick and end touch it only before timerDone
	quit, done := x.hbQuit, x.hbDone
	x.mu.Unlock()
	if t != nil { // nil: a job whose timeout ran out before it began has none
		t.Stop()
	}
	if quit != nil {
		close(quit)
		<-done
	}
}

// leased is told by the heartbeat loop that the lease was renewed for
// lease, another length than before. A shorter lease shortens the handler's
// grace, and brings forward a give-up already set by as much: the database
// renews a timed-out job's lease no further than its timeout plus the
// renewing lease, and a grace of half the claim's lease outlived it, the
// handler still running when the job was reaped and run again elsewhere.
func (x *execution) leased(lease time.Duration) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if lease <= 0 || lease >= x.graceLease {
		return
	}
	cut := x.w.grace(x.graceLease) - x.w.grace(lease)
	x.graceLease = lease
	if cut > 0 && !x.timerDone && !x.giveUpAt.IsZero() {
		x.giveUpAt = x.giveUpAt.Add(-cut)
		if x.timer != nil {
			x.timer.Reset(x.nextDue(time.Now()))
		}
	}
}

// abandon gives up on a handler that did not return within its grace after its
// context ended, unless it has returned since.
func (x *execution) abandon() {
	x.mu.Lock()
	graceFor := x.w.grace(x.graceLease)
	x.mu.Unlock()
	// Counted before the state says abandoned, so that answered, which
	// uncounts it once it sees that state, never runs before this: the
	// count is also in place before the report makes the job's retry due.
	w := x.w
	w.abandoned.add(x.job.ID)
	if !x.state.CompareAndSwap(callRunning, callAbandoned) {
		w.abandoned.remove(x.job.ID) // it returned first: never abandoned
		return
	}
	// The cause is finish's to add (it does for a timeout or a shutdown).
	w.stats.Abandoned.Add(1)
	w.log.Warn("handler abandoned: it did not return after its context ended; its slot stays taken until it returns",
		"job", x.job.ID, "kind", x.job.Kind, "attempt", x.job.Attempt, "grace", graceFor, "cause", context.Cause(x.ctx))
	x.finish(outcome{err: fmt.Errorf("handler did not return within %s after its context ended; %w (its slot stays taken until it returns)",
		graceFor, errAbandoned), abandoned: true})
}

// endCanceled ends an execution whose job an operator canceled: counted and
// told as "canceled", not as a lost lease.
func (x *execution) endCanceled(msg string, reason any) {
	w, job := x.w, x.job
	jobLog{w.log, job}.Info(msg, "reason", reason)
	w.stats.Canceled.Add(1)
	if obs := w.cfg.Observer; obs != nil {
		took := time.Since(x.began)
		w.observe(func() { obs.Finished(job, "canceled", took) })
	}
	x.done()
}

// finish stops the heartbeat and writes the outcome o, unless the job is no
// longer ours.
func (x *execution) finish(o outcome) {
	w, job := x.w, x.job
	log := jobLog{w.log, job}
	x.stopTimer()
	o.err = readable(o.err) // before anything below reads it

	cause := x.releaseContext()
	switch {
	case errors.Is(cause, errCanceled):
		// Canceled by an operator: the job is no longer ours, and whatever we
		// report would be rejected. Not a lost lease: an alert on those
		// fired at every cancel.
		x.endCanceled("handler stopped", cause)
		return
	case errors.Is(cause, errLeaseLost):
		// The job is no longer ours: whatever we report would be rejected.
		log.Info("handler stopped", "reason", cause)
		w.stats.LeaseLost.Add(1)
		w.observeLeaseLost(job)
		x.done()
		return
	case errors.Is(cause, errLeaseUncertain):
		// Heartbeats failed, but the lease may still be ours: report what the
		// handler returned, and let the fence decide. Dropping it left a job
		// whose handler had succeeded running under nobody until the reaper
		// ran it again. A handler that returned the context's cause says
		// why already (the stored error said it twice).
		if o.err != nil && !inChain(o.err, errLeaseUncertain) {
			o.err = fmt.Errorf("%v: %w", cause, o.err)
		}
	case o.err == nil && errors.Is(cause, errShutdown):
		// Finished despite the hard stop: the result is real, keep it.
	case errors.Is(cause, errShutdown):
		o.stopped = true
		// %w on both: a Snooze or Permanent the handler answered with still decides.
		// (A handler that returned the context's cause says so already.)
		if !inChain(o.err, errShutdown) {
			o.err = fmt.Errorf("%w: %w", errShutdown, o.err)
		}
	case o.err != nil && errors.Is(cause, errHandlerTimeout):
		// A handler that returned the context's cause says so already
		// ("job timed out after 1s: job timed out after 1s" before).
		if !inChain(o.err, errHandlerTimeout) {
			o.err = fmt.Errorf("%v: %w", cause, o.err)
		}
	}
	x.report(o)
}

// releaseContext cancels the handler's context, which has returned or was
// given up on after its context ended, and drops it, and returns its cause
// before that: called once, by finish, which whoever had the last word on the
// handler (state) calls. A handler's context so ends when it returns, as an
// HTTP request's does, not once its outcome is written; a success waiting for
// its completion batch holds no context, and a hard stop that comes then has
// nothing to end (end).
func (x *execution) releaseContext() (cause error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	cause = context.Cause(x.ctx)
	x.cancel(nil)
	x.ctx, x.cancel = nil, nil
	return cause
}

// done ends the execution once its outcome is written or given up on: it
// calls ended. Its context was released already (finish).
func (x *execution) done() {
	x.w.running.remove(x)
	x.ended()
}

// readable returns err, or, if reading it panics (a typed nil pointer whose
// Error or Unwrap method dereferences it, a common slip), a PanicError saying
// so: the worker reads the error, its text and its chain, outside any
// recover, and the panic ended the worker's process, and every job it held,
// each time the job ran again.
//
// The worker reads a handler's error only through readable, inChain and
// found, which walk its chain themselves, bounded (eachInChain), and call no
// Is or As method of it: errors.Is and errors.As walked an error that wraps
// itself for ever, and an As that matched every type hid a Snooze beneath it.
func readable(err error) (out error) {
	if err == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			out = &PanicError{Value: fmt.Sprintf("the handler returned an error (%T) that panicked when read: %v", err, r), Stack: string(debug.Stack())}
		}
	}()
	// The text reported; those of the errors it wraps are not read. Then
	// every Unwrap of the chain.
	_ = err.Error()
	if _, ok := eachInChain(err, func(error) bool { return false }); !ok {
		return &PanicError{Value: fmt.Sprintf("the handler returned an error (%T) that panicked when read", err)}
	}
	return err
}

// maxErrorChain bounds the errors eachInChain visits in one chain: an error
// that wraps itself is walked this far, and no further.
const maxErrorChain = 10_000

// eachInChain calls visit on err and on the errors it wraps (Unwrap() error,
// Unwrap() []error), depth first, at most maxErrorChain of them, until visit
// answers true (found). ok is false if a method of the chain panicked.
func eachInChain(err error, visit func(error) bool) (found, ok bool) {
	defer func() {
		if recover() != nil {
			found, ok = false, false
		}
	}()
	budget := maxErrorChain
	var walk func(error) bool
	walk = func(e error) bool {
		if e == nil || budget <= 0 {
			return false
		}
		budget--
		if visit(e) {
			return true
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			return walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				if budget <= 0 {
					break // spent: the rest of a wide chain is not walked either
				}
				if walk(c) {
					return true
				}
			}
		}
		return false
	}
	return walk(err), true
}

// inChain reports whether target is one of the errors of err's chain.
func inChain(err, target error) bool {
	hit, _ := eachInChain(err, func(e error) bool { return e == target })
	return hit
}

// found is the first *E of err's chain that is not nil, or nil. Drover's own
// error types are found by their type, not through a user's As method (one
// that answered true without setting its target ended the process).
func found[E any, P interface {
	*E
	error
}](err error) P {
	var hit P
	eachInChain(err, func(e error) bool {
		p, ok := e.(P)
		if ok && p != nil {
			hit = p
		}
		return hit != nil
	})
	return hit
}

// encodeResult is json.Marshal, with a panic of the value's own MarshalJSON
// (which json.Marshal passes on) turned into an error with its stack.
func encodeResult(v any) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, &PanicError{Value: fmt.Sprintf("encoding panicked: %v", r), Stack: string(debug.Stack())}
		}
	}()
	return json.Marshal(v)
}

// giveBack returns a job whose handler was never started to its queue without
// using an execution (a snooze, of after, which the fence refuses if the job
// was taken back already), and logs why.
func (w *Worker) giveBack(job *Job, fence driver.FenceParams, log jobLog, release func(), deadline time.Time, after time.Duration, why string, args ...any) {
	release()
	// Retried while it may succeed, as a report is: a job not given back
	// sits running until its lease expires, and the reaper counts the
	// execution its claim took (on a last attempt: failed without a run).
	// Every try carries the first's request_id: a try that applied but whose
	// answer was lost is then answered as applied. Without one, its resend
	// was refused as stale and the job counted as a lost lease.
	fence.RequestID = newRequestID()
	var err error
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if err = w.be.snooze(deadline, fence, after); err == nil || !retryableReport(err) || time.Now().Add(wait).After(deadline) {
			break
		}
		time.Sleep(wait)
	}
	log.Warn(why, append(args, "given_back", err == nil, "err", err)...)
	if err != nil && !driver.CanceledDuring(err, job.Attempt) { // a canceled job needs no giving back
		w.stats.LeaseLost.Add(1)
		w.observeLeaseLost(job)
	}
}

// heartbeatTiming is the heartbeat interval and the give-up margin (see
// heartbeat) for a lease of length lease: HeartbeatInterval for the worker's
// own LeaseDuration; for a server's lease of another length, a third of it if
// that is shorter.
func (w *Worker) heartbeatTiming(lease time.Duration) (interval, margin time.Duration) {
	interval = w.cfg.HeartbeatInterval
	if lease != w.cfg.LeaseDuration {
		interval = min(interval, lease/3)
	}
	return interval, min(interval, lease-interval) / 2
}

// grace is how long a handler may take to return after its context ended: at
// most half of its lease, since a timed-out job's lease is renewed no further
// than its timeout plus one lease (the heartbeat caps it), and the worker must
// give up on the handler and report before then, or the job could be reaped
// and run again while this worker still counted it as running.
func (w *Worker) grace(lease time.Duration) time.Duration {
	return min(w.cfg.TimeoutGrace, lease/2)
}

// timeoutError is the cause of a handler's timeout: errHandlerTimeout, formatted
// only if it happens.
type timeoutError time.Duration

func (e timeoutError) Error() string {
	return errHandlerTimeout.Error() + " after " + time.Duration(e).String()
}
func (e timeoutError) Unwrap() error { return errHandlerTimeout }

// jobLog logs with the job's attributes, adding them only to lines that are
// written: slog.Logger.With would build a logger for every job.
type jobLog struct {
	l   *slog.Logger
	job *Job
}

func (j jobLog) enabled(level slog.Level) bool { return j.l.Enabled(context.Background(), level) }

func (j jobLog) log(level slog.Level, msg string, args []any) {
	if !j.enabled(level) {
		return
	}
	j.l.Log(context.Background(), level, msg, append([]any{"job", j.job.ID, "kind", j.job.Kind, "attempt", j.job.Attempt}, args...)...)
}

func (j jobLog) Info(msg string, args ...any)  { j.log(slog.LevelInfo, msg, args) }
func (j jobLog) Warn(msg string, args ...any)  { j.log(slog.LevelWarn, msg, args) }
func (j jobLog) Error(msg string, args ...any) { j.log(slog.LevelError, msg, args) }

// errHandlerGoexit is the outcome of a handler that ended its goroutine with
// runtime.Goexit instead of returning.
var errHandlerGoexit = errors.New("handler called runtime.Goexit instead of returning")

// heartbeat extends the lease now and every HeartbeatInterval until stop
// closes, and at once when poke receives (a cancel's wake-up, see poke).
// It cancels the handler (end) when the job was canceled, when the lease is
// lost, and when heartbeats kept failing: before the lease last known good
// would expire (leaseFrom, the time the claim was sent, at first; then the
// time the last successful heartbeat was sent), whether or not a heartbeat
// call is under way then. Past the lease's end the reaper may requeue the job
// and another worker claim it, so the handler must have returned by then: the
// loop gives up early enough for the handler's grace to fit before the end
// (giveUpLead), and end cuts the grace at the end. A failed heartbeat is
// tried again after a quarter of an interval, not a whole one.
//
// A server may answer a heartbeat with the lease's length (a remote worker's
// lease is the server's): the loop paces itself, and gives up, by that, and
// tells leased, which fits the handler's grace to it.
func (w *Worker) heartbeat(log jobLog, fence driver.FenceParams, end func(cause error, by time.Time), leased func(time.Duration), stop, poke <-chan struct{}, leaseFrom time.Time, lease time.Duration) {
	interval, margin := w.heartbeatTiming(lease)
	renewed := leaseFrom // the lease runs at least until renewed + lease
	giveUp := renewed.Add(lease - w.giveUpLead(lease, interval, margin))
	lost := func() {
		end(fmt.Errorf("%w: no heartbeat succeeded in the %s since the lease was last renewed; it may expire within %s",
			errLeaseUncertain, time.Since(renewed).Round(time.Millisecond), max(0, time.Until(renewed.Add(lease))).Round(time.Millisecond)),
			renewed.Add(lease))
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	deadline := time.NewTimer(time.Until(giveUp))
	defer deadline.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-stop:
				return
			case <-deadline.C:
				lost()
				return
			case <-t.C:
			case <-poke:
			}
		}
		sent := time.Now()
		callEnd := sent.Add(interval)
		if giveUp.Before(callEnd) {
			callEnd = giveUp
		}
		if !sent.Before(giveUp) {
			// A job started late in its lease (its claim's answer held up,
			// but before runTask's give-back point) is past the give-up
			// point at its first heartbeat. It was canceled at once, for a
			// lease no heartbeat had tried to renew, and its execution
			// spent: it tries one, answered by the give-back point.
			callEnd = renewed.Add(lease - margin)
			if !first || !sent.Before(callEnd) {
				lost()
				return
			}
		}
		ctx, c := context.WithDeadline(context.Background(), callEnd)
		cancelRequested, renewedFor, err := w.be.heartbeat(ctx, fence)
		c()
		switch {
		case err == nil && cancelRequested:
			end(errCanceled, time.Time{})
			return
		case err == nil:
			if renewedFor > 0 && renewedFor != lease {
				// Another server, or the same under another setting,
				// renewed it for another length.
				lease = renewedFor
				interval, margin = w.heartbeatTiming(lease)
				leased(lease)
			}
			// The lease now runs from no earlier than the request's sending.
			renewed = sent
			giveUp = renewed.Add(lease - w.giveUpLead(lease, interval, margin))
			deadline.Reset(time.Until(giveUp))
			t.Reset(interval)
		case errors.Is(err, driver.ErrLeaseLost), errors.Is(err, driver.ErrNotFound):
			end(fmt.Errorf("%w: %v", errLeaseLost, err), time.Time{})
			return
		default:
			log.Warn("heartbeat failed", "err", err)
			if !time.Now().Before(giveUp) {
				lost()
				return
			}
			t.Reset(max(interval/4, minInterval))
		}
	}
}

// giveUpLead is how long before a lease's end the heartbeat loop gives up on
// a lease it could not renew: the handler's grace, so that a handler that
// returns within it has returned before the lease may expire; but never so
// early that no heartbeat is sent first (the lease less an interval and a
// margin), and at least the margin.
func (w *Worker) giveUpLead(lease, interval, margin time.Duration) time.Duration {
	return max(margin, min(w.grace(lease), lease-interval-margin))
}

// report writes the outcome, retrying transient errors with the same request_id
// (so a write that committed before its answer was lost is not applied twice;
// a library worker's completion is recognised by its fence instead, see
// localBackend.complete) until the lease would have expired. An answer that
// says retrying cannot help — the lease is lost, or the server refused the
// request — ends it at once. Then it calls x.done.
//
// A library worker's success, the common case, is handed to the batching
// completer without waiting for it: the completer calls x.completed once the
// batch is written, and only a failed write brings the job back to a goroutine
// of its own. A job in flight so holds no goroutine while its completion
// waits for its batch; when each did, a busy worker kept thousands of them
// parked, which the GC scanned at every cycle and woke one by one.
//
// A success allocates little: what a failure needs is worked out in classify,
// and the log line's arguments are built only when it is written.
func (x *execution) report(o outcome) {
	w, job := x.w, x.job
	if o.err == nil {
		x.result = jsonNull
		if o.result != nil {
			var err error
			if x.result, err = encodeResult(o.result); err != nil {
				if _, panicked := err.(*PanicError); panicked { // ours: its stack is kept
					o.err = Permanent(fmt.Errorf("encode result of kind %q: %w", job.Kind, err))
				} else {
					// %v: the text only, none of the encoder's (or a
					// MarshalJSON's) errors in the chain the worker walks.
					o.err = Permanent(fmt.Errorf("encode result of kind %q: %v", job.Kind, err))
				}
			} else if err = driver.CheckResult(x.result); err != nil {
				// Retrying would only fail the same way; say why, once.
				o.err = Permanent(fmt.Errorf("result of kind %q cannot be stored: %w", job.Kind, err))
			}
		}
	}
	// Counted from here, not before the encoding: a result slower to encode
	// than a lease had its deadline pass before its first sending, and was
	// dropped unsent.
	x.deadline = time.Now().Add(x.lease)
	if o.err != nil {
		r := &failReport{err: o.err}
		r.f, r.snooze, r.snoozed = w.classify(job, x.h, o.err, o.stopped)
		x.failed = r
		if o.abandoned {
			// The handler may still be running: its job runs again no sooner
			// than its lease, renewed at most a lease ago, would have expired,
			// as a crashed worker's does. At a shutdown's zero delay another
			// worker ran it beside the abandoned handler at once; a remote
			// worker's server applies its own backoff, so the delay is asked
			// of it (retry_after_seconds).
			r.f.retryDelay = max(r.f.retryDelay, x.lease)
			r.f.minDelay = x.lease
		}
	}
	local, isLocal := w.be.(*localBackend)
	if !isLocal || o.err != nil {
		// A library worker's completions go without one (localBackend.complete).
		x.fence.RequestID = newRequestID()
	}
	if isLocal && o.err == nil {
		local.completeAsync(x)
		return
	}
	x.reportFrom(nil)
}

// completed is the answer to a success handed to the completer (see report):
// err is the batch's answer for this job.
func (x *execution) completed(err error) {
	if err == nil {
		x.reported("succeeded")
		return
	}
	x.w.runners.run(taskFunc(func() { x.reportFrom(err) }))
}

// reportFrom is report's loop of attempts; first, if not nil, is the answer
// to a first attempt already made.
func (x *execution) reportFrom(first error) {
	w, log := x.w, jobLog{x.w.log, x.job}
	refused := false // a report was refused and replaced by a failure
	for wait, retry := 50*time.Millisecond, first != nil; ; wait, retry = min(2*wait, 2*time.Second), true {
		var err error
		var outcome string
		switch {
		case first != nil:
			err, first = first, nil
		case x.failed == nil:
			err = w.be.complete(x.deadline, x.fence, x.result, retry)
			outcome = "succeeded"
		case x.failed.snoozed:
			err = w.be.snooze(x.deadline, x.fence, x.failed.snooze)
			outcome = "snoozed"
		default:
			var dead bool
			dead, err = w.be.fail(x.deadline, x.fence, x.failed.f)
			outcome = "retried"
			if dead {
				outcome = "failed"
			}
		}
		if err == nil {
			x.reported(outcome)
			return
		}
		if driver.CanceledDuring(err, x.job.Attempt) {
			// Canceled while it ran, and the cancel came before its
			// heartbeat told of it: the cancel is the job's outcome, not
			// a lost lease (helper-89).
			x.endCanceled("result not recorded: the job was canceled while it ran", err)
			return
		}
		if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound) {
			// Logged before it is counted: whoever sees the count sees the line.
			log.Warn("result rejected: the lease was lost", "err", err)
			w.stats.LeaseLost.Add(1)
			w.observeLeaseLost(x.job)
			x.done()
			return
		}
		if !retryableReport(err) {
			if !refused {
				// The server refused the report itself (a 4xx other than a lost
				// lease or a refused token): report a failure that says so
				// instead, which it can take, rather than leave the job running
				// until its lease expires and the reaper counts the execution
				// again.
				refused = true
				log.Error("result refused; reporting a failure instead", "err", err)
				var r failReport
				if x.failed != nil {
					r = *x.failed
				}
				f := refusedFailure(r.err, r.snoozed, r.f, err)
				x.failed = &failReport{err: errors.New(f.err), f: f}
				continue
			}
			log.Error("result refused; the job will be retried after its lease expires", "err", err)
			x.done()
			return
		}
		if time.Now().Add(wait).After(x.deadline) {
			// A last try in the time left, while there is room for one: a
			// sending cut short (see httpBackend.report) leaves some.
			wait = time.Until(x.deadline) / 2
		}
		if wait < minInterval {
			msg := "could not record the result; the job will be retried after its lease expires"
			_, remote := w.be.(*httpBackend)
			switch {
			case errors.Is(err, errRetryCheck), remote && !errors.Is(err, ErrUnauthorized):
				// An earlier try may have been applied: the job may be done.
				// Over HTTP any sending may have reached the server and its
				// answer been lost (helper-88 saw a job succeeded with this
				// result while this said it was not recorded).
				msg = "could not tell whether the result was recorded; if it was not, the job will be retried after its lease expires"
			case errors.Is(err, ErrUnauthorized):
				msg = "could not record the result: the server refused the worker's token; the job will be retried after its lease expires"
			}
			log.Error(msg, "err", err)
			x.done()
			return
		}
		log.Warn("recording the result failed; retrying", "err", err)
		time.Sleep(wait) // backoff between attempts to reach the store
	}
}

// reported counts and logs a written outcome, tells the observer, and ends
// the execution.
func (x *execution) reported(outcome string) {
	w, log := x.w, jobLog{x.w.log, x.job}
	switch outcome {
	case "succeeded":
		w.stats.Succeeded.Add(1)
	case "snoozed":
		w.stats.Snoozed.Add(1)
	case "failed":
		w.stats.Failed.Add(1)
	case "retried":
		w.stats.Retried.Add(1)
	}
	if log.enabled(slog.LevelInfo) {
		log.Info("job finished", "outcome", outcomeName(x.reportErr()), "took", time.Since(x.began).Round(time.Microsecond))
	}
	if obs := w.cfg.Observer; obs != nil {
		took := time.Since(x.began)
		w.observe(func() { obs.Finished(x.job, outcome, took) })
	}
	x.done()
}

// refusedFailure is the failure reported in place of an outcome the server
// refused: a result it cannot take (too large, say) fails the job for good, as a
// result the database cannot store does on a local worker; a refused failure or
// snooze is reported as a failure under the retry policy, its own error cut to
// what any request can carry.
func refusedFailure(handlerErr error, snoozed bool, f failure, refusal error) failure {
	const keep = 4 << 10
	by := "the database"
	var re *RemoteError
	if errors.As(refusal, &re) {
		by = "the server"
	}
	switch {
	case handlerErr == nil:
		return failure{err: driver.CleanText(driver.Clip(fmt.Sprintf("the result was refused by %s: %v", by, refusal), keep)), permanent: true}
	case snoozed:
		return failure{err: driver.CleanText(driver.Clip(fmt.Sprintf("the snooze was refused by %s: %v", by, refusal), keep))}
	}
	f.err = driver.Clip(fmt.Sprintf("the failure report was refused by %s: %v; the handler's error: %s", by, refusal, f.err), keep)
	f.stack = ""
	return f
}

// jsonNull is the stored result of a handler that returned nil.
var jsonNull = json.RawMessage("null")

// classify turns a handler's error into a snooze (snoozed, after d) or a failure.
func (w *Worker) classify(job *Job, h *kindHandler, err error, stopped bool) (f failure, d time.Duration, snoozed bool) {
	if snooze := found[snoozeError](err); snooze != nil {
		return failure{}, snooze.d, true
	}
	backoff := w.cfg.Backoff
	if h != nil && h.backoff != nil {
		backoff = h.backoff
	}
	f = failure{
		err: failureMessage(err), permanent: found[permanentError](err) != nil,
		retryDelay: w.backoffOf(backoff, job), // added to the database clock, never ours
	}
	if stopped {
		f.retryDelay = 0 // interrupted, not failing: another worker may take it at once
	}
	if panicErr := found[PanicError](err); panicErr != nil {
		f.stack = driver.CleanText(panicErr.Stack)
	}
	return f, 0, false
}

// backoffOf is backoff's delay after the job's executions, kept within 0 to
// MaxBackoff (see Backoff), or DefaultBackoff's if backoff panics: a panic
// there ended the worker's process.
func (w *Worker) backoffOf(backoff Backoff, job *Job) time.Duration {
	return safedelay.Of(backoff, DefaultBackoff, job.Executions, MaxBackoff, w.log,
		"job", job.ID, "kind", job.Kind, "attempt", job.Attempt)
}

// failureMessage is the error text a failure reports: err's, cleaned (see
// driver.CleanText), or a stand-in saying it was empty, on a local worker as on
// a remote one (the server requires an error).
func failureMessage(err error) string {
	msg := driver.CleanText(err.Error())
	if strings.TrimSpace(msg) == "" {
		return "handler returned an error with an empty message"
	}
	return msg
}

// newRequestID is a random (version 4) UUID naming one report, so that a retry of
// it is recognised. It needs to be unique, not secret (the lease token is the
// secret, and the database makes it), so its bits come from math/rand/v2's
// generator (ChaCha8, seeded by the runtime from the operating system) instead
// of a getrandom call per job; uuid.NewString also cost two allocations to this
// one.
func newRequestID() string {
	var u uuid.UUID
	binary.LittleEndian.PutUint64(u[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(u[8:], rand.Uint64())
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u.String()
}

func outcomeName(err error) string {
	switch {
	case err == nil:
		return "succeeded"
	case found[snoozeError](err) != nil:
		return "snoozed"
	case found[permanentError](err) != nil:
		return "failed permanently: " + err.Error()
	}
	return "error: " + err.Error()
}

func (w *Worker) observeLeaseLost(job *Job) {
	if obs := w.cfg.Observer; obs != nil {
		w.observe(func() { obs.LeaseLost(job) })
	}
}

// abandonedJobs counts, by job id, a worker's abandoned handlers that have not
// returned yet (see runTask).
type abandonedJobs struct {
	n   atomic.Int64 // handlers in ids: runTask reads only this while it is 0
	mu  sync.Mutex
	ids map[int64]int
}

func (a *abandonedJobs) any() bool { return a.n.Load() > 0 }

func (a *abandonedJobs) add(id int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ids == nil {
		a.ids = map[int64]int{}
	}
	a.ids[id]++
	a.n.Add(1)
}

func (a *abandonedJobs) remove(id int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ids[id] <= 1 {
		delete(a.ids, id)
	} else {
		a.ids[id]--
	}
	a.n.Add(-1)
}

func (a *abandonedJobs) holds(id int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ids[id] > 0
}
