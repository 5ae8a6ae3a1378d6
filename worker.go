package drover

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/deflog"
	"github.com/drover-dev/drover/wakeup"
)

// WorkerConfig configures a Worker. Zero values take the defaults in brackets.
type WorkerConfig struct {
	ID                string         // identifies the worker in leases and events [host-pid-random]
	Queues            map[string]int // queue name → handlers run at once, 1 to 1,000,000 [{"default": 10}]; a slot frees when its handler returns, and at most 2×N+CompletionBatch of a queue's jobs are held while their outcomes are written
	Workers           *Workers       // the handlers (required)
	LeaseDuration     time.Duration  // how long a claim is trusted without a heartbeat [30s]
	HeartbeatInterval time.Duration  // at least 10ms [LeaseDuration/3]
	PollInterval      time.Duration  // fallback when no wake-up arrives; at least 10ms [1s]
	ClaimBatch        int            // most jobs one claim takes, bounded by free slots [the queue's concurrency, at most 100]
	ClaimCooldown     time.Duration  // under a backlog, how long to wait for half a batch of slots to free before claiming fewer [5ms]; negative: never wait
	DefaultTimeout    time.Duration  // for jobs and kinds that set none; negative: none [1m]
	TimeoutGrace      time.Duration  // how long a handler may take to return after its context ends before it is abandoned (its attempt reported, its slot kept until it returns); at most half the lease, whatever is set here (see Worker.grace) [10s]
	Backoff           Backoff        // retry delay unless the kind overrides it [DefaultBackoff]; a remote worker's server decides instead
	CompletionBatch   int            // most completions written in one transaction, up to 10,000; 1: no batching [100]; local workers only
	// Wakeups, when set, is a wake-up transport (e.g. wakeup.NewNATS) whose pointers
	// trigger claims in addition to the driver's own wake-ups; each pointer is
	// acknowledged after the claim it triggered.
	Wakeups wakeup.Transport
	// Observer, when set, hears what the worker does (for metrics).
	Observer Observer
	// Logger gets the worker's logs [the Client's; a remote worker's:
	// warnings and errors through slog.Default()].
	Logger *slog.Logger
}

// Worker claims and runs jobs, from the database (NewWorker) or from a Drover
// server over HTTP (NewRemoteWorker). Start it, then Stop it for a graceful shutdown.
type Worker struct {
	be  backend
	cfg WorkerConfig
	log *slog.Logger

	mu           sync.Mutex
	started      bool
	stopped      bool                    // Stop was called; a later Stop waits for it (stopDone)
	stopDone     chan struct{}           // closed when the first Stop has stopped the worker
	cancelClaims context.CancelFunc      // stops claiming and the NATS wake-ups
	cancelJobs   context.CancelCauseFunc // cancels claims under way (hard stop); see hardStop
	jobsCtx      context.Context         // of claims and the backend's wake-ups; ends at the hard stop, and at Stop's end
	jobsBase     context.Context         // Start's context's values, never canceled: of handler contexts
	running      runningJobs             // executions whose outcome is not yet written
	producers    sync.WaitGroup          // claim loops
	jobs         sync.WaitGroup          // executions in flight
	runners      *runners                // the goroutines executions run on
	draining     atomic.Bool             // claimed jobs not yet started go back to queued
	abandoned    abandonedJobs           // jobs of handlers abandoned and still running
	stats        WorkerStats
}

// WorkerStats counts what a worker did since it started.
type WorkerStats struct {
	Claimed, Succeeded, Retried, Failed, Snoozed, LeaseLost atomic.Int64
	// Canceled counts handlers stopped because an operator canceled their
	// job while it ran. They are not lost leases: nothing went wrong.
	Canceled atomic.Int64
	// Abandoned counts handlers given up on after TimeoutGrace; each held its
	// slot until it returned, and may still be running.
	Abandoned atomic.Int64
}

var (
	errShutdown  = errors.New("worker shutting down")
	errCanceled  = errors.New("job canceled by an operator")
	errLeaseLost = errors.New("lease lost")
	// errLeaseUncertain: heartbeats kept failing until the lease may have
	// expired. The handler is stopped, but the lease may still be this
	// worker's: its outcome is reported, and the fence decides.
	errLeaseUncertain = errors.New("lease may have expired")
	// errAbandoned: the handler did not return within its grace after its
	// context ended (see run).
	errAbandoned      = errors.New("handler abandoned")
	errHandlerTimeout = errors.New("job timed out")
)

// NewWorker returns a Worker of c running the handlers of cfg.Workers.
func NewWorker(c *Client, cfg *WorkerConfig) (*Worker, error) {
	if c == nil || cfg == nil || cfg.Workers == nil {
		return nil, errors.New("drover: NewWorker needs a client and a config with Workers")
	}
	w, err := newWorker(cfg, c.log)
	if err != nil {
		return nil, err
	}
	w.be = newLocalBackend(c.drv, w)
	return w, nil
}

// Upper bounds of WorkerConfig: a queue's handler slots, and the completions
// one write carries (Start makes a channel that size). Past them a worker
// overflowed its bound on jobs in flight and never claimed, or Start panicked.
// Exported so a program can refuse a setting before it opens anything.
const (
	MaxConcurrency     = 1_000_000
	MaxCompletionBatch = 10_000
)

// minInterval bounds HeartbeatInterval and PollInterval from below: at a
// nanosecond, heartbeats or claims ran in a loop against the database.
const minInterval = 10 * time.Millisecond

// newWorker applies the defaults of cfg and validates it; the caller sets the backend.
func newWorker(cfg *WorkerConfig, fallbackLog *slog.Logger) (*Worker, error) {
	w := &Worker{cfg: *cfg}
	cf := &w.cfg
	if cf.ID == "" {
		cf.ID = defaultWorkerID()
	}
	if err := driver.ValidateWorkerID("id", cf.ID); err != nil {
		return nil, err
	}
	// A copy: the caller's map, changed after NewWorker (a config reused for
	// the next worker), changed the queues Start ran, unchecked (a queue set
	// to 0 slots was never claimed from).
	cf.Queues = maps.Clone(cf.Queues)
	if len(cf.Queues) == 0 {
		cf.Queues = map[string]int{DefaultQueue: 10}
	}
	for q, n := range cf.Queues {
		if err := driver.ValidateName("queue", q); err != nil {
			return nil, err
		}
		if n < 1 || n > MaxConcurrency {
			return nil, driver.Invalid("concurrency", "queue %q: %d, must be 1 to %d", q, n, MaxConcurrency)
		}
	}
	if cf.LeaseDuration == 0 {
		cf.LeaseDuration = 30 * time.Second
	}
	if cf.LeaseDuration < 100*time.Millisecond {
		return nil, driver.Invalid("lease_duration", "%s is below 100ms", cf.LeaseDuration)
	}
	if cf.HeartbeatInterval == 0 {
		cf.HeartbeatInterval = cf.LeaseDuration / 3
	}
	if cf.HeartbeatInterval >= cf.LeaseDuration {
		return nil, driver.Invalid("heartbeat_interval", "%s must be shorter than the lease (%s)", cf.HeartbeatInterval, cf.LeaseDuration)
	}
	if cf.HeartbeatInterval < minInterval {
		return nil, driver.Invalid("heartbeat_interval", "%s, must be at least %s", cf.HeartbeatInterval, minInterval)
	}
	if cf.PollInterval == 0 {
		cf.PollInterval = time.Second
	}
	if cf.PollInterval < minInterval {
		return nil, driver.Invalid("poll_interval", "%s, must be at least %s", cf.PollInterval, minInterval)
	}
	if cf.ClaimBatch < 0 {
		return nil, driver.Invalid("claim_batch", "%d, must not be negative", cf.ClaimBatch)
	}
	if cf.CompletionBatch < 0 || cf.CompletionBatch > MaxCompletionBatch {
		return nil, driver.Invalid("completion_batch", "%d, must be 0 (the default) to %d", cf.CompletionBatch, MaxCompletionBatch)
	}
	if cf.TimeoutGrace < 0 {
		return nil, driver.Invalid("timeout_grace", "%s, must not be negative", cf.TimeoutGrace)
	}
	if cf.ClaimBatch == 0 {
		cf.ClaimBatch = 100 // bounded per queue by its concurrency: a claim fills the free slots
	}
	if cf.ClaimCooldown == 0 {
		cf.ClaimCooldown = 5 * time.Millisecond
	}
	if cf.DefaultTimeout == 0 {
		cf.DefaultTimeout = time.Minute
	}
	if cf.TimeoutGrace == 0 {
		cf.TimeoutGrace = 10 * time.Second
	}
	if cf.Backoff == nil {
		cf.Backoff = DefaultBackoff
	}
	if cf.CompletionBatch == 0 {
		cf.CompletionBatch = 100
	}
	w.log = cf.Logger
	if w.log == nil {
		w.log = fallbackLog
	}
	if w.log == nil {
		w.log = deflog.New()
	}
	w.log = w.log.With("worker", cf.ID)
	return w, nil
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Stats returns the worker's counters.
func (w *Worker) Stats() *WorkerStats { return &w.stats }

// logHardStop says why Stop cancels the running jobs: its deadline, or its
// context canceled (drover worker's second signal), which the log called a
// deadline too.
func (w *Worker) logHardStop(ctx context.Context) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		w.log.Warn("shutdown deadline reached; canceling running jobs")
		return
	}
	w.log.Warn("shutdown canceled; canceling running jobs", "cause", context.Cause(ctx))
}

// Start begins claiming jobs. It returns at once; the worker runs until Stop.
// It refuses a config whose Workers has no handler yet. A remote worker first
// asks its server whether it takes the worker's token (up to 5 s): a refused
// token fails Start with an error matching ErrUnauthorized, and the worker may
// be started again; a server that does not answer does not.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return errors.New("drover: worker stopped; a Worker runs once (make another with NewWorker)")
	}
	if w.started {
		return errors.New("drover: worker already started")
	}
	if w.cfg.Workers.empty() {
		// It would claim jobs only to fail them, attempt after attempt, into
		// the DLQ.
		return errors.New("drover: the worker's Workers has no handler: Register at least one before Start")
	}
	if err := w.be.check(ctx); err != nil {
		return err
	}
	w.started = true
	claimCtx, cancelClaims := context.WithCancel(context.WithoutCancel(ctx))
	w.cancelClaims = cancelClaims
	w.jobsBase = context.WithoutCancel(ctx)
	w.jobsCtx, w.cancelJobs = context.WithCancelCause(w.jobsBase)

	w.be.start()
	w.runners = newRunners()
	w.runners.start(runnerIdle)

	wakes := make(map[string]*queueWake, len(w.cfg.Queues))
	names := make([]string, 0, len(w.cfg.Queues))
	for q := range w.cfg.Queues {
		wakes[q] = &queueWake{ch: make(chan struct{}, 1)}
		names = append(names, q)
	}
	forward := func(sub <-chan string) {
		for q := range sub {
			if id, ok := driver.WakeupCanceled(q); ok {
				w.running.poke(id)
				continue
			}
			for name, qw := range wakes {
				if q == "" || q == name {
					qw.signal()
				}
			}
		}
	}
	// Subscribed until Stop has ended every job (jobsCtx), not only the
	// claims: a job canceled while Stop waits for it to finish hears of it
	// at once too.
	if sub, err := w.be.wakeups(w.jobsCtx); err != nil {
		// Tried again until it succeeds: a worker that started while the
		// database restarted polled, and only polled, for the rest of its life.
		w.log.Warn("wake-ups unavailable; polling until they can be subscribed to", "err", err)
		go w.subscribeLater(w.jobsCtx, wakes, forward)
	} else if sub != nil {
		go forward(sub)
	}
	if w.cfg.Wakeups != nil {
		if sub, err := w.cfg.Wakeups.Subscribe(claimCtx, names); err != nil {
			w.log.Warn("wake-up transport unavailable; polling only", "err", err)
		} else {
			go func() {
				for m := range sub {
					if qw := wakes[m.Queue]; qw != nil {
						qw.add(m)
					} else {
						_ = m.Ack() // not ours to claim; the pointer is only a hint
					}
				}
			}()
		}
	}
	for q, n := range w.cfg.Queues {
		w.producers.Add(1)
		go w.produce(claimCtx, q, n, wakes[q])
	}
	w.log.Info("worker started", "queues", w.cfg.Queues)
	return nil
}

// Stop shuts down gracefully: it stops claiming, gives claimed-but-not-started jobs
// back to their queue, and waits for running jobs until ctx ends; then it cancels
// the handlers still running and waits for them to return or be abandoned after
// TimeoutGrace. A handler that returns an error then has its job retried at once,
// as a failed attempt (on its last attempt the job fails, as after a crash),
// unless it answered Snooze or Permanent, which decide as they always do; one that
// returns success has its result kept. An abandoned handler's job is retried no
// sooner than one lease later, as a crashed worker's would be.
//
// Stop may be called more than once, and from several goroutines: a later call
// waits for the stop under way to end, as the first does, and returns nil
// once it has; if its own ctx ends first, it cancels the running handlers (the
// hard stop), still waits for the worker to stop, and returns ctx.Err(). It
// returned nil at once, while handlers still ran and their outcomes were not
// yet written: a caller that then closed the database lost them.
//
// Stop waits for the worker's handlers and for its Observer's calls, so it
// must not be called from either (as River's Stop must not be called from a
// job): it would wait for its own caller, for ever with a ctx that never ends,
// and from an Observer even past ctx's end. To stop a worker from a job,
// call Stop in a goroutine of its own, or end the ctx Run was given.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if !w.started {
		w.mu.Unlock()
		return nil
	}
	if w.stopped {
		done := w.stopDone
		w.mu.Unlock()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			w.hardStop()
			<-done
			return ctx.Err()
		}
	}
	w.stopped = true
	w.stopDone = make(chan struct{})
	defer close(w.stopDone)
	w.mu.Unlock()
	w.draining.Store(true)
	w.cancelClaims()
	// A claim under way is let finish (see localBackend.claim), within ctx:
	// past it, the hard stop below cancels it too.
	var err error
	claims := make(chan struct{})
	go func() { w.producers.Wait(); close(claims) }()
	select {
	case <-claims:
	case <-ctx.Done():
		w.logHardStop(ctx)
		w.hardStop()
		<-claims
		err = ctx.Err()
	}

	done := make(chan struct{})
	go func() { w.jobs.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		if err == nil {
			w.logHardStop(ctx)
		}
		w.hardStop()
		<-done
		err = ctx.Err()
	}
	w.hardStop()
	w.be.stop()
	w.runners.stop()
	w.log.Info("worker stopped")
	return err
}

// queueSlots counts a queue's jobs for produce: running (handlers not yet
// returned, bounded by the queue's slots) and pending (claimed, outcome not
// yet written); freed tells produce that either went down.
type queueSlots struct {
	running, pending atomic.Int64
	freed            chan struct{}
}

func (q *queueSlots) signal() {
	select {
	case q.freed <- struct{}{}:
	default:
	}
}

// claimGroup is what the jobs of one claim share: when their leases began,
// and, for each timeout among them, the context that ends at it, the parent of
// each job's own. Every job of a claim has the same deadline for the same
// timeout, so one timer a claim and timeout stands in for a timer a job.
type claimGroup struct {
	base      context.Context // of every deadline context
	leaseFrom time.Time       // when the jobs' leases began (see produce)
	left      atomic.Int64    // jobs whose outcome is not yet written (or given up on)
	mu        sync.Mutex
	deadlines []groupDeadline // one a timeout; most claims have one
}

type groupDeadline struct {
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
}

// deadline is the context that ends timeout after the leases began, with
// timeoutError(timeout) as its cause.
func (g *claimGroup) deadline(timeout time.Duration) context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, d := range g.deadlines {
		if d.timeout == timeout {
			return d.ctx
		}
	}
	ctx, cancel := context.WithDeadlineCause(g.base, g.leaseFrom.Add(timeout), timeoutError(timeout))
	g.deadlines = append(g.deadlines, groupDeadline{timeout, ctx, cancel})
	return ctx
}

// ended counts a job's end; after the last, the deadline contexts are released.
func (g *claimGroup) ended() {
	if g.left.Add(-1) > 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, d := range g.deadlines {
		d.cancel()
	}
	g.deadlines = nil
}

// hardStop cancels the claims under way and every running handler's context,
// with errShutdown as the cause.
func (w *Worker) hardStop() {
	w.cancelJobs(errShutdown)
	w.running.stop(errShutdown)
}

// runningJobs is a worker's executions whose outcome is not yet written, for
// the hard stop to cancel.
type runningJobs struct {
	mu      sync.Mutex
	head    *execution
	stopped error // the hard stop's cause, once it came
	// unseen holds, by job, when a cancel was heard for a job none of whose
	// executions ran here: a claim of it may have been committed and its
	// answer still be on its way (a network's round trip for a remote
	// worker), and the cancel's pointer came first. add pokes such a job's
	// execution as it registers. The pointer was dropped, and the handler
	// ran for a canceled job until its next heartbeat (helper-89). A
	// canceled job is never claimed again, so an entry matches only a claim
	// made before the cancel; one no claim matches is dropped after
	// unseenCancelFor, or when unseenCancelsMax are kept.
	unseen map[int64]time.Time
}

const (
	unseenCancelsMax = 4096
	unseenCancelFor  = 3 * time.Minute // past a claim's longest wait (60 s) and its answer
)

// add adds x; after the hard stop, x's context is canceled at once, and if a
// cancel of its job was heard before it came, it checks its lease at once.
func (r *runningJobs) add(x *execution) {
	r.mu.Lock()
	x.next = r.head
	if r.head != nil {
		r.head.prev = x
	}
	r.head = x
	stopped := r.stopped
	heard, canceled := r.unseen[x.job.ID]
	if canceled {
		delete(r.unseen, x.job.ID)
	}
	r.mu.Unlock()
	if stopped != nil {
		x.end(stopped, time.Time{})
	}
	if canceled && time.Since(heard) < unseenCancelFor {
		x.poke()
	}
}

func (r *runningJobs) remove(x *execution) {
	r.mu.Lock()
	if x.prev != nil {
		x.prev.next = x.next
	} else if r.head == x {
		r.head = x.next
	}
	if x.next != nil {
		x.next.prev = x.prev
	}
	x.prev, x.next = nil, nil
	r.mu.Unlock()
}

// poke has every execution of job id check its lease now rather than at its
// next heartbeat (execution.poke): the job was canceled
// (driver.CanceledWakeup). A walk of the jobs running, as a cancel is rare.
// With none running here, the cancel is kept for an execution that may come
// (runningJobs.unseen).
func (r *runningJobs) poke(id int64) {
	r.mu.Lock()
	var found []*execution
	for x := r.head; x != nil; x = x.next {
		if x.job.ID == id {
			found = append(found, x)
		}
	}
	if len(found) == 0 {
		r.keepUnseen(id, time.Now())
	}
	r.mu.Unlock()
	for _, x := range found {
		x.poke()
	}
}

// keepUnseen records a cancel heard for job id at now; r.mu is held. At the
// bound, the entries past unseenCancelFor go, and then, if none did, the
// oldest.
func (r *runningJobs) keepUnseen(id int64, now time.Time) {
	if r.unseen == nil {
		r.unseen = make(map[int64]time.Time)
	}
	if _, ok := r.unseen[id]; !ok && len(r.unseen) >= unseenCancelsMax {
		oldest, oldestAt := int64(0), now
		for k, at := range r.unseen {
			if now.Sub(at) >= unseenCancelFor {
				delete(r.unseen, k)
			} else if at.Before(oldestAt) {
				oldest, oldestAt = k, at
			}
		}
		if len(r.unseen) >= unseenCancelsMax {
			delete(r.unseen, oldest)
		}
	}
	r.unseen[id] = now
}

// stop cancels the context of every execution, and of every one added later,
// with cause.
func (r *runningJobs) stop(cause error) {
	r.mu.Lock()
	if r.stopped == nil {
		r.stopped = cause
	}
	var all []*execution
	for x := r.head; x != nil; x = x.next {
		all = append(all, x)
	}
	r.mu.Unlock()
	for _, x := range all {
		x.end(cause, time.Time{})
	}
}

// Run starts the worker and stops it gracefully, waiting up to shutdownTimeout,
// when ctx ends.
func (w *Worker) Run(ctx context.Context, shutdownTimeout time.Duration) error {
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return w.Stop(sctx)
}

// produce claims jobs of one queue whenever slots are free and work may be ready:
// after a wake-up, a poll tick, a finished job, or a claim that filled its batch.
// Behind a long-polling backend the next claim follows an empty one at once,
// since the server already waited; an empty answer that came back sooner than
// PollInterval still waits for the tick, so a server that does not hold never
// makes a busy loop.
func (w *Worker) produce(ctx context.Context, queue string, slots int, wake *queueWake) {
	defer w.producers.Done()
	// running counts handlers, bounded by slots. A slot frees when its handler
	// returns, not when its outcome is stored: outcomes are written in batches,
	// and holding the slot through the write would cap throughput at slots per
	// write latency. pending (claimed, outcome not yet stored) bounds the jobs
	// whose outcome is still being written, and so the work a crash can hand
	// back to the reaper.
	q := &queueSlots{freed: make(chan struct{}, 1)}
	running, pending, freed := &q.running, &q.pending, q.freed
	maxPending := int64(2*slots + w.cfg.CompletionBatch)
	// A success handed to the completer is no longer heartbeated: its lease
	// runs out unless it is written first. While one handed over now would
	// wait a heartbeat margin for its write, the database takes completions
	// slower than they come, and no more are claimed until it catches up.
	// Bounded by maxPending alone, a worker whose completions the database
	// was slow to take claimed on, its successes waited behind each other
	// past their leases, and the reaper gave them to be run again.
	_, waitBound := w.heartbeatTiming(w.cfg.LeaseDuration)
	// room is how many jobs may be claimed now: the free handler slots, bounded
	// by the room left for jobs whose outcome is still being written.
	room := func() int {
		if w.be.completionWait() >= waitBound {
			return 0
		}
		return int(min(int64(slots)-running.Load(), maxPending-pending.Load()))
	}
	poll := time.NewTicker(w.cfg.PollInterval)
	defer poll.Stop()
	backlog := false // the last claim filled its batch: more work is waiting
	var failing claimFailures
	batch := min(slots, w.cfg.ClaimBatch)
	for {
		// starved: no room to claim. Only then does a freed slot call for a claim;
		// after a claim that found the queue drained, a finishing job is no sign
		// of new work, and claiming on each would cost a query per job.
		starved := true
		if free := room(); free > 0 && ctx.Err() == nil {
			starved = false
			if backlog && free < (batch+1)/2 && w.cfg.ClaimCooldown > 0 {
				// Under a backlog, slots free one by one; claiming each alone costs a
				// transaction per job. Wait briefly for more to free up.
				if w.waitFreed(ctx, freed, room, (batch+1)/2) {
					continue
				}
				if ctx.Err() != nil {
					return
				}
				free = room()
			}
			want := min(free, w.cfg.ClaimBatch)
			asked := time.Now()
			pointers := wake.take()
			jobs, cl, err := w.be.claim(ctx, queue, want)
			// When the jobs' leases began: no earlier than the claim was sent,
			// unless the backend knows a later bound (a long poll's wait) or an
			// earlier one (a claim it had to resend).
			leaseFrom, lease := asked, w.cfg.LeaseDuration
			if !cl.from.IsZero() {
				leaseFrom = cl.from
			}
			if cl.length > 0 {
				lease = cl.length
			}
			if obs := w.cfg.Observer; obs != nil && len(jobs) > 0 {
				w.observe(func() { obs.Claimed(queue, len(jobs)) })
			}
			if err != nil && ctx.Err() == nil {
				failing.failed(w.log, queue, err)
			} else if err == nil {
				failing.succeeded(w.log, queue)
			}
			// Acked after the claim, whether it got their jobs or not (the job rows
			// are the truth); after a failed claim they stay unacked and come back.
			wake.settle(pointers, err == nil)
			var group *claimGroup
			if len(jobs) > 0 {
				group = &claimGroup{base: w.jobsBase, leaseFrom: leaseFrom}
				group.left.Store(int64(len(jobs)))
			}
			// The claim's executions, allocated execChunk at a time, not one a
			// job. A chunk lives while any of its executions is referenced: a
			// handler that never returns holds at most execChunk of them.
			var execs []execution
			for i, j := range jobs {
				running.Add(1)
				pending.Add(1)
				w.jobs.Add(1)
				if i%execChunk == 0 {
					execs = make([]execution, min(execChunk, len(jobs)-i))
				}
				x := &execs[i%execChunk]
				x.w, x.job, x.group, x.slots, x.lease = w, j, group, q, lease
				w.runners.run(x)
			}
			backlog = err == nil && len(jobs) == want
			if backlog {
				continue // there may be more
			}
			if err == nil && w.be.longPoll() && (len(jobs) > 0 || time.Since(asked) >= w.cfg.PollInterval) {
				continue // the server waits for work itself
			}
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case <-wake.ch:
				waiting = false
			case <-freed:
				waiting = !starved
			case <-poll.C:
				waiting = false
			}
		}
	}
}

// subscribeLater subscribes to the backend's wake-ups, which failed at Start,
// trying again with backoff until it can or ctx ends, and then forwards them.
// Once subscribed it wakes every queue once, for what was sent before it
// listened.
func (w *Worker) subscribeLater(ctx context.Context, wakes map[string]*queueWake, forward func(<-chan string)) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		sub, err := w.be.wakeups(ctx)
		if err != nil {
			continue
		}
		if sub == nil {
			return
		}
		w.log.Info("wake-ups subscribed")
		for _, qw := range wakes {
			qw.signal()
		}
		forward(sub)
		return
	}
}

// waitFreed waits up to ClaimCooldown for room() to reach want. It reports true
// if it did, false on timeout or when ctx ends.
func (w *Worker) waitFreed(ctx context.Context, freed <-chan struct{}, room func() int, want int) bool {
	t := time.NewTimer(w.cfg.ClaimCooldown)
	defer t.Stop()
	for room() < want {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return false
		case <-freed:
		}
	}
	return true
}

func defaultWorkerID() string {
	host, _ := os.Hostname()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// claimFailures logs a queue's failing claims: the first, then a changed
// error, and otherwise at most once a minute with the count, and once when
// claims succeed again. A worker with a wrong token, or a database down for
// an hour, logged an error at every poll.
type claimFailures struct {
	n             int       // failures in a row
	since, logged time.Time // the first of them; the last one logged
	last          string    // the last one logged
}

func (c *claimFailures) failed(log *slog.Logger, queue string, err error) {
	now := time.Now()
	if c.n == 0 {
		c.since = now
	}
	c.n++
	if msg := err.Error(); c.n == 1 || msg != c.last || now.Sub(c.logged) >= time.Minute {
		log.Error("claim failed", "queue", queue, "err", err, "failures", c.n, "since", c.since.Format(time.RFC3339))
		c.last, c.logged = msg, now
	}
}

func (c *claimFailures) succeeded(log *slog.Logger, queue string) {
	if c.n > 0 {
		log.Info("claims succeed again", "queue", queue, "failures", c.n, "for", time.Since(c.since).Round(time.Millisecond))
		*c = claimFailures{}
	}
}

// queueWake is one queue's wake-up signal plus the transport pointers received
// since its last claim, which are acknowledged once a claim has looked at them.
type queueWake struct {
	ch      chan struct{}
	mu      sync.Mutex
	pending []wakeup.Message
}

// maxPendingPointers bounds what a busy worker holds unacknowledged; beyond it a
// pointer is acked at once (the job row stays the truth, and polling finds it).
const maxPendingPointers = 1000

func (q *queueWake) signal() {
	select {
	case q.ch <- struct{}{}:
	default:
	}
}

func (q *queueWake) add(m wakeup.Message) {
	q.mu.Lock()
	if len(q.pending) < maxPendingPointers {
		q.pending = append(q.pending, m)
		m = wakeup.Message{}
	}
	q.mu.Unlock()
	_ = m.Ack() // a no-op unless the pointer was not kept
	q.signal()
}

func (q *queueWake) take() []wakeup.Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.pending
	q.pending = nil
	return p
}

// settle acks the pointers a successful claim looked at; after a failed claim it
// keeps them for the next one, so they are acked only once a claim has run,
// up to maxPendingPointers with those that came meanwhile: the rest are
// acked now. Put back in front of up to as many that came while the claim
// ran, they went past the bound, by up to a thousand a failed claim, for as
// long as claims kept failing.
func (q *queueWake) settle(ms []wakeup.Message, claimed bool) {
	if !claimed {
		q.mu.Lock()
		all := append(ms, q.pending...)
		n := min(len(all), maxPendingPointers)
		q.pending = all[:n:n]
		q.mu.Unlock()
		for i := n; i < len(all); i++ {
			_ = all[i].Ack()
			all[i] = wakeup.Message{}
		}
		return
	}
	for _, m := range ms {
		_ = m.Ack()
	}
}

// observe calls an Observer method, logging a panic instead of letting it end
// the process: an observer is user code, called outside any handler's recover.
func (w *Worker) observe(call func()) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("observer panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	call()
}

// Observer hears what a worker does, for metrics. Calls come from many goroutines
// and must not block, nor call the worker's Stop, which waits for them.
type Observer interface {
	// Claimed: n jobs of queue were claimed and started.
	Claimed(queue string, n int)
	// Finished: the outcome of job (succeeded, retried, failed or snoozed) was
	// recorded after it ran for took; or, with outcome "canceled", an
	// operator canceled the job while it ran, and its handler was stopped
	// after took (the cancel is the job's record; the worker writes nothing).
	// A library worker's successes are told by the goroutine that writes
	// them, batch by batch: one that blocks holds up every completion of the
	// worker.
	Finished(job *Job, outcome string, took time.Duration)
	// LeaseLost: the job was no longer ours (the lease expired and the job was
	// reaped, or a report was refused as stale): something an operator may
	// want to alert on. A cancel is not one (Finished, "canceled").
	LeaseLost(job *Job)
}
