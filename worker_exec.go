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

// execute runs one started job to a reported end. It calls release once the
// handler has returned, before the outcome is written; for a handler abandoned
// after TimeoutGrace, only when it does return (see run).
// leaseFrom is when the job's lease began, as near as the worker can tell
// without overestimating it (see produce), and lease its length: the one the
// server set for a remote worker, else LeaseDuration.
func (w *Worker) execute(job *Job, release func(), leaseFrom time.Time, lease time.Duration) {
	began := time.Now()
	fence := driver.FenceParams{ID: job.ID, Attempt: job.Attempt, LeaseToken: job.LeaseToken}
	log := jobLog{w.log, job}
	if _, margin := w.heartbeatTiming(lease); !began.Before(leaseFrom.Add(lease - margin)) {
		// The answer came too late (held up on its way, or this process was
		// paused): the lease may have run out, and the job be another
		// worker's. Its handler is not started.
		w.giveBack(job, fence, log, release, began.Add(lease), "not run: its lease may have expired before its claim's answer arrived",
			"lease", lease, "since_lease_began", began.Sub(leaseFrom).Round(time.Millisecond))
		return
	}
	if w.draining.Load() {
		// Claimed while the worker was stopping (a claim under way when Stop
		// was called; Stop sets draining before its hard stop): Stop gives
		// such jobs back. Started after the hard stop, its handler's context
		// was already canceled, and a job on its last attempt failed without
		// a run.
		w.giveBack(job, fence, log, release, began.Add(lease), "not run: the worker is stopping")
		return
	}
	h := w.cfg.Workers.get(job.Kind)
	timeout := job.Timeout
	if timeout == 0 && h != nil {
		timeout = h.timeout
	}
	if timeout == 0 {
		timeout = w.cfg.DefaultTimeout
	}
	ctx, cancel := context.WithCancelCause(w.jobsCtx)
	defer cancel(nil)
	if timeout > 0 {
		// Counted from when the lease began, as the database counts the
		// timeout that caps it (started_at + timeout + lease): counted from
		// the answer's arrival, a late answer's handler and its grace
		// outlived that cap, and the job was reaped and run again while this
		// worker still ran it.
		var cancelT context.CancelFunc
		ctx, cancelT = context.WithDeadlineCause(ctx, leaseFrom.Add(timeout), timeoutError(timeout))
		defer cancelT()
	}

	hb := w.startHeartbeat(fence, cancel, leaseFrom, lease)
	o := w.run(ctx, h, job, release, w.grace(lease))
	hb.stop()
	o.err = readable(o.err) // before anything below reads it

	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errLeaseLost), errors.Is(cause, errCanceled):
		// The job is no longer ours: whatever we report would be rejected.
		w.stats.LeaseLost.Add(1)
		w.observeLeaseLost(job)
		log.Info("handler stopped", "reason", cause)
		return
	case errors.Is(cause, errLeaseUncertain):
		// Heartbeats failed, but the lease may still be ours: report what the
		// handler returned, and let the fence decide. Dropping it left a job
		// whose handler had succeeded running under nobody until the reaper
		// ran it again.
		if o.err != nil {
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
	w.report(log, job, h, fence, o, began, lease)
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
// using an execution (a snooze of zero, which the fence refuses if the job was
// taken back already), and logs why.
func (w *Worker) giveBack(job *Job, fence driver.FenceParams, log jobLog, release func(), deadline time.Time, why string, args ...any) {
	release()
	// Retried while it may succeed, as a report is: a job not given back
	// sits running until its lease expires, and the reaper counts the
	// execution its claim took (on a last attempt: failed without a run).
	var err error
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if err = w.be.snooze(deadline, fence, 0); err == nil || !retryable(err) || time.Now().Add(wait).After(deadline) {
			break
		}
		time.Sleep(wait)
	}
	if err != nil {
		w.stats.LeaseLost.Add(1)
		w.observeLeaseLost(job)
	}
	log.Warn(why, append(args, "given_back", err == nil, "err", err)...)
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

// run calls the handler, turning a panic into an error with its stack, and
// calls release when it has returned. It gives up on a handler that does not
// return within TimeoutGrace after its context ended: its outcome is then that
// it was abandoned, and its slot stays taken until it does return, so the
// queue's concurrency bounds the handlers really running: a handler that
// ignores its context still holds whatever it was using, and on a queue whose
// every slot is taken this worker cannot start the job's retry beside it.
func (w *Worker) run(ctx context.Context, h *kindHandler, job *Job, release func(), graceFor time.Duration) outcome {
	if h == nil {
		release()
		return outcome{err: fmt.Errorf("%w for kind %q", ErrNoHandler, job.Kind)}
	}
	call := handlerCalls.Get().(*handlerCall)
	call.state.Store(callRunning)
	call.release = release
	go func() {
		returned := false
		defer func() {
			if r := recover(); r != nil {
				call.answer(outcome{err: &PanicError{Value: r, Stack: string(debug.Stack())}})
			} else if !returned {
				// runtime.Goexit (t.FailNow in a handler, say): no value and no
				// panic, but the handler is over; without an answer the job would
				// hold its slot and lease until its timeout, or for ever.
				call.answer(outcome{err: errHandlerGoexit})
			}
		}()
		res, err := h.run(ctx, job)
		returned = true
		call.answer(outcome{result: res, err: err})
	}()
	select {
	case o := <-call.ch:
		return call.received(o)
	case <-ctx.Done():
	}
	grace := time.NewTimer(graceFor)
	defer grace.Stop()
	select {
	case o := <-call.ch:
		return call.received(o)
	case <-grace.C:
		if !call.state.CompareAndSwap(callRunning, callAbandoned) {
			return call.received(<-call.ch) // it returned just now: its answer is on its way
		}
		// The call is left to the handler, not recycled: it releases the slot.
		// The cause is execute's to add (it does for a timeout or a shutdown).
		w.stats.Abandoned.Add(1)
		w.log.Warn("handler abandoned: it did not return after its context ended; its slot stays taken until it returns",
			"job", job.ID, "kind", job.Kind, "attempt", job.Attempt, "grace", graceFor, "cause", context.Cause(ctx))
		return outcome{err: fmt.Errorf("handler did not return within %s after its context ended; %w (its slot stays taken until it returns)",
			graceFor, errAbandoned), abandoned: true}
	}
}

// errHandlerGoexit is the outcome of a handler that ended its goroutine with
// runtime.Goexit instead of returning.
var errHandlerGoexit = errors.New("handler called runtime.Goexit instead of returning")

// handlerCall is one call of a handler: the channel it answers on, and who had
// the last word, the handler returning (answered) or run giving up on it
// (abandoned); only the first of the two happens. Calls are recycled (a
// busy worker makes one per job), each once its answer was received.
type handlerCall struct {
	ch      chan outcome // buffered: the handler never waits to answer
	state   atomic.Int32
	release func() // frees the handler's slot
}

const (
	callRunning = iota
	callAnswered
	callAbandoned
)

var handlerCalls = sync.Pool{New: func() any { return &handlerCall{ch: make(chan outcome, 1)} }}

// answer is the handler's outcome: for run, or, if run gave up on the handler,
// only the release of its slot, which waited for it.
func (c *handlerCall) answer(o outcome) {
	if c.state.CompareAndSwap(callRunning, callAnswered) {
		c.ch <- o
		return
	}
	c.release()
}

// received recycles c once run has its answer o, and frees the slot.
func (c *handlerCall) received(o outcome) outcome {
	release := c.release
	c.release = nil
	handlerCalls.Put(c)
	release()
	return o
}

// heartbeater runs a job's heartbeat loop, which starts only once the job has run
// for one HeartbeatInterval. Most jobs end before that, and a goroutine, a ticker
// and two channels for every job were a large share of a busy worker's
// allocations and of the goroutine stacks each GC cycle scans.
type heartbeater struct {
	timer   *time.Timer
	mu      sync.Mutex
	stopped bool
	quit    chan struct{} // set when the loop starts
	done    chan struct{}
}

// startHeartbeat arms the job's heartbeat loop (see heartbeat); stop ends it.
func (w *Worker) startHeartbeat(fence driver.FenceParams, cancel context.CancelCauseFunc, leaseFrom time.Time, lease time.Duration) *heartbeater {
	hb := &heartbeater{}
	interval, _ := w.heartbeatTiming(lease)
	// The first heartbeat is due one interval into the lease, which runs from
	// the claim's sending, not from the handler's start.
	hb.timer = time.AfterFunc(time.Until(leaseFrom.Add(interval)), func() {
		hb.mu.Lock()
		if hb.stopped {
			hb.mu.Unlock()
			return
		}
		hb.quit, hb.done = make(chan struct{}), make(chan struct{})
		hb.mu.Unlock()
		defer close(hb.done)
		w.heartbeat(fence, cancel, hb.quit, leaseFrom, lease)
	})
	return hb
}

// stop ends the heartbeat loop and waits for it, or keeps it from starting.
func (hb *heartbeater) stop() {
	hb.mu.Lock()
	hb.stopped = true
	quit, done := hb.quit, hb.done
	hb.mu.Unlock()
	hb.timer.Stop()
	if quit != nil {
		close(quit)
		<-done
	}
}

// heartbeat extends the lease now and every HeartbeatInterval until stop closes.
// It cancels the handler when the job was canceled, when the lease is lost, and
// when heartbeats kept failing: a margin before the lease last known good would
// expire (leaseFrom, the time the claim was sent, at first; then the time the
// last successful heartbeat was sent), whether or not a heartbeat call is under
// way then. Past that point the reaper may requeue the job and another worker
// claim it, so the margin is the handler's time to stop: half an interval, or
// half the time between the next heartbeat and the lease's end if that is
// shorter (an interval close to the lease), so that a heartbeat is always sent
// before the worker gives up.
func (w *Worker) heartbeat(fence driver.FenceParams, cancel context.CancelCauseFunc, stop <-chan struct{}, leaseFrom time.Time, lease time.Duration) {
	interval, margin := w.heartbeatTiming(lease)
	giveUp := leaseFrom.Add(lease - margin)
	lost := func() {
		cancel(fmt.Errorf("%w: no heartbeat succeeded in the %s since the lease was last renewed; it may expire within %s",
			errLeaseUncertain, time.Since(giveUp.Add(margin-lease)).Round(time.Millisecond), margin))
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
			}
		}
		sent := time.Now()
		if !sent.Before(giveUp) {
			lost()
			return
		}
		callEnd := sent.Add(interval)
		if giveUp.Before(callEnd) {
			callEnd = giveUp
		}
		ctx, c := context.WithDeadline(context.Background(), callEnd)
		cancelRequested, err := w.be.heartbeat(ctx, fence)
		c()
		switch {
		case err == nil && cancelRequested:
			cancel(errCanceled)
			return
		case err == nil:
			// The lease now runs from no earlier than the request's sending.
			giveUp = sent.Add(lease - margin)
			deadline.Reset(time.Until(giveUp))
		case errors.Is(err, driver.ErrLeaseLost), errors.Is(err, driver.ErrNotFound):
			cancel(fmt.Errorf("%w: %v", errLeaseLost, err))
			return
		default:
			w.log.Warn("heartbeat failed", "job", fence.ID, "err", err)
			if !time.Now().Before(giveUp) {
				lost()
				return
			}
		}
	}
}

// report writes the outcome, retrying transient errors with the same request_id
// (so a write that committed before its answer was lost is not applied twice;
// a library worker's completion is recognised by its fence instead, see
// localBackend.complete) until the lease would have expired. An answer that says retrying cannot help —
// the lease is lost, or the server refused the request — ends it at once.
//
// A success, the common case, allocates little: what a failure needs is worked
// out in classify, and the log line's arguments are built only when it is
// written.
func (w *Worker) report(log jobLog, job *Job, h *kindHandler, fence driver.FenceParams, o outcome, began time.Time, lease time.Duration) {
	deadline := time.Now().Add(lease)
	var result json.RawMessage
	if o.err == nil {
		result = jsonNull
		if o.result != nil {
			var err error
			if result, err = encodeResult(o.result); err != nil {
				if _, panicked := err.(*PanicError); panicked { // ours: its stack is kept
					o.err = Permanent(fmt.Errorf("encode result of kind %q: %w", job.Kind, err))
				} else {
					// %v: the text only, none of the encoder's (or a
					// MarshalJSON's) errors in the chain the worker walks.
					o.err = Permanent(fmt.Errorf("encode result of kind %q: %v", job.Kind, err))
				}
			} else if err = driver.CheckResult(result); err != nil {
				// Retrying would only fail the same way; say why, once.
				o.err = Permanent(fmt.Errorf("result of kind %q cannot be stored: %w", job.Kind, err))
			}
		}
	}
	var f failure
	var snooze time.Duration
	var snoozed bool
	if o.err != nil {
		f, snooze, snoozed = w.classify(job, h, o.err, o.stopped)
		if o.abandoned {
			// The handler may still be running: its job runs again no sooner
			// than its lease, renewed at most a lease ago, would have expired,
			// as a crashed worker's does. At a shutdown's zero delay another
			// worker ran it beside the abandoned handler at once; a remote
			// worker's server applies its own backoff, so the delay is asked
			// of it (retry_after_seconds).
			f.retryDelay = max(f.retryDelay, lease)
			f.minDelay = lease
		}
	}
	if _, local := w.be.(*localBackend); !local || o.err != nil {
		// A library worker's completions go without one (localBackend.complete).
		fence.RequestID = newRequestID()
	}
	var outcome string
	refused := false // a report was refused and replaced by a failure
	for wait, retry := 50*time.Millisecond, false; ; wait, retry = min(2*wait, 2*time.Second), true {
		var err error
		switch {
		case o.err == nil:
			err = w.be.complete(deadline, fence, result, retry)
			if err == nil {
				w.stats.Succeeded.Add(1)
				outcome = "succeeded"
			}
		case snoozed:
			err = w.be.snooze(deadline, fence, snooze)
			if err == nil {
				w.stats.Snoozed.Add(1)
				outcome = "snoozed"
			}
		default:
			var dead bool
			dead, err = w.be.fail(deadline, fence, f)
			if err == nil && dead {
				w.stats.Failed.Add(1)
				outcome = "failed"
			} else if err == nil {
				w.stats.Retried.Add(1)
				outcome = "retried"
			}
		}
		if err == nil {
			if log.enabled(slog.LevelInfo) {
				log.Info("job finished", "outcome", outcomeName(o.err), "took", time.Since(began).Round(time.Microsecond))
			}
			if obs := w.cfg.Observer; obs != nil {
				took := time.Since(began)
				w.observe(func() { obs.Finished(job, outcome, took) })
			}
			return
		}
		if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound) {
			w.stats.LeaseLost.Add(1)
			w.observeLeaseLost(job)
			log.Warn("result rejected: the lease was lost", "err", err)
			return
		}
		if !retryable(err) {
			if !refused {
				// The server refused the report itself (a 4xx other than a lost
				// lease): report a failure that says so instead, which it can
				// take, rather than leave the job running until its lease
				// expires and the reaper counts the execution again.
				refused = true
				log.Error("result refused; reporting a failure instead", "err", err)
				f = refusedFailure(o.err, snoozed, f, err)
				o.err, snoozed = errors.New(f.err), false
				continue
			}
			log.Error("result refused; the job will be retried after its lease expires", "err", err)
			return
		}
		if time.Now().Add(wait).After(deadline) {
			msg := "could not record the result; the job will be retried after its lease expires"
			if errors.Is(err, errRetryCheck) { // an earlier try may have been applied: the job may be done
				msg = "could not tell whether the result was recorded; if it was not, the job will be retried after its lease expires"
			}
			log.Error(msg, "err", err)
			return
		}
		log.Warn("recording the result failed; retrying", "err", err)
		time.Sleep(wait) // backoff between attempts to reach the store
	}
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

// backoffOf is backoff's delay after the job's executions, or DefaultBackoff's
// if backoff panics: a panic there ended the worker's process.
func (w *Worker) backoffOf(backoff Backoff, job *Job) (d time.Duration) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("backoff function panicked; using DefaultBackoff", "job", job.ID, "kind", job.Kind, "panic", r)
			d = DefaultBackoff(job.Executions)
		}
	}()
	return backoff(job.Executions)
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
