package maintenance

import (
	"context"
	"crypto/rand"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-dev/drover/driver"
)

// Config configures the engine. Zero values take the defaults in brackets, and so
// do negative periods and TTLs (a ticker cannot run at them).
type Config struct {
	ID                string        // this process's candidate id (required)
	LeaderTTL         time.Duration // leadership lease [15s]
	ReapInterval      time.Duration // lease reaper period [1s]
	ReconcileInterval time.Duration // wake-up reconciler period [1s]
	RetentionInterval time.Duration // retention period [1m]
	Retention         time.Duration // finished jobs older than this are deleted; negative: keep forever [7 days]
	Logger            *slog.Logger
	// OnLeader, if set, is called with true when this process becomes leader and
	// false when it stops being leader.
	OnLeader func(bool)
	// Publish, if set, also receives the reconciler's wake-ups (queues with
	// claimable jobs), for an external transport such as NATS. A pass waits for
	// it one ReconcileInterval at most; a call that ignores its context keeps
	// later passes from calling it until it returns, and may outlive Run.
	Publish func(ctx context.Context, queues []string) error
}

// Engine elects a leader and, while leading, runs the maintenance loops.
type Engine struct {
	drv    driver.Driver
	cfg    Config
	log    *slog.Logger
	leader atomic.Bool
	reaped atomic.Int64
	// trustUntil is when this process must stop acting as leader unless it extends
	// its lease first, in nanoseconds since born on the monotonic clock, and
	// trustUntilWall the same on the wall clock (unix nanoseconds); 0: not
	// trusted. Both must hold: a wall clock stepped back would have kept a
	// leader that could no longer renew acting that much longer, and the
	// monotonic clock stands still while the host is suspended, past which the
	// wall clock has moved on as the database's has. Every loop checks before
	// each pass.
	trustUntil     atomic.Int64
	trustUntilWall atomic.Int64
	born           time.Time
	// publishing is set while a Config.Publish call has not returned (publish).
	publishing atomic.Bool
}

// margin is held back from the lease: the leader stops acting this long before
// the lease it last confirmed could expire and a successor could be elected.
func (e *Engine) margin() time.Duration { return e.cfg.LeaderTTL / 10 }

func (e *Engine) trusted() bool {
	return int64(time.Since(e.born)) < e.trustUntil.Load() && time.Now().UnixNano() < e.trustUntilWall.Load()
}

// New returns an engine; Run starts it.
func New(drv driver.Driver, cfg Config) *Engine {
	if cfg.LeaderTTL <= 0 {
		cfg.LeaderTTL = 15 * time.Second
	}
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = time.Second
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = time.Second
	}
	if cfg.RetentionInterval <= 0 {
		cfg.RetentionInterval = time.Minute
	}
	if cfg.Retention == 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Engine{drv: drv, cfg: cfg, log: log.With("engine", cfg.ID), born: time.Now()}
}

// IsLeader reports whether this process leads right now: it won an election
// and the lease it last extended is still trusted. The flag alone lags: the
// election loop clears it only once an election call fails or is refused, and
// a call to a database that stopped answering takes up to a third of the TTL
// to fail, by when the lease may have expired and a successor lead.
func (e *Engine) IsLeader() bool { return e.leader.Load() && e.trusted() }

// Reaped counts jobs the lease reaper moved while this engine led.
func (e *Engine) Reaped() int64 { return e.reaped.Load() }

// Run campaigns for leadership until ctx ends, running the loops while leading,
// and resigns on the way out so a successor need not wait for the lease to expire.
func (e *Engine) Run(ctx context.Context) {
	// This Run's token: only it extends or resigns the lease it takes, so an
	// engine of the same ID (a hostname, a copied config) in another process
	// waits for the lease to be free or expired instead of sharing it.
	token := rand.Text()
	// The leader extends every TTL/3; a candidate tries every TTL/10, so it
	// takes over at most TTL/10 after the lease it waits for expires.
	interval, candidate := e.cfg.LeaderTTL/3, e.cfg.LeaderTTL/10
	t := time.NewTimer(candidate)
	defer t.Stop()
	var (
		loopsCancel context.CancelFunc
		loops       sync.WaitGroup
	)
	stopLoops := func(why string) {
		e.trustUntil.Store(0)
		e.trustUntilWall.Store(0)
		if loopsCancel != nil {
			loopsCancel()
			loops.Wait()
			loopsCancel = nil
			e.leader.Store(false)
			e.onLeader(false)
			e.log.Info(why)
		}
	}
	defer func() {
		stopLoops("leadership released: shutting down")
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.drv.LeaderResign(rctx, e.cfg.ID, token)
	}()
	for {
		asked := time.Now()
		// A leader's call ends, at the latest, when its trust does: a call
		// to a database that stopped answering would otherwise keep the
		// loops' OnLeader(false) waiting up to a third of the TTL past the
		// lease, when a successor may lead. Both clocks bound it, as both
		// bound the trust (a wall clock stepped back leaves the monotonic
		// one the nearer end).
		timeout := interval
		if loopsCancel != nil {
			mono := time.Duration(e.trustUntil.Load()) - time.Since(e.born)
			wall := time.Until(time.Unix(0, e.trustUntilWall.Load()))
			timeout = max(min(timeout, mono, wall), 0)
		}
		actx, cancel := context.WithTimeout(ctx, timeout)
		lead, err := e.drv.LeaderAttemptElect(actx, driver.LeaderParams{ID: e.cfg.ID, Token: token, TTL: e.cfg.LeaderTTL})
		cancel()
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			e.log.Warn("leader election failed", "err", err)
			if loopsCancel != nil && !e.trusted() {
				stopLoops("leadership lost: its lease could not be extended")
			}
		case lead:
			// Measured from before we asked, so the local estimate never outlives
			// the lease the database granted.
			until := asked.Add(e.cfg.LeaderTTL - e.margin())
			e.trustUntil.Store(int64(until.Sub(e.born)))
			e.trustUntilWall.Store(until.UnixNano())
			if loopsCancel == nil {
				lctx, cancelLoops := context.WithCancel(ctx)
				loopsCancel = cancelLoops
				e.leader.Store(true)
				e.onLeader(true)
				e.log.Info("became leader")
				e.startLoops(lctx, &loops)
			}
		default:
			stopLoops("leadership lost: another engine holds the lease")
		}
		next := candidate // also a leader's retry after a failed extension
		if loopsCancel != nil && err == nil {
			next = interval
		}
		t.Reset(max(time.Until(asked.Add(next)), 0))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (e *Engine) startLoops(ctx context.Context, wg *sync.WaitGroup) {
	loop := func(every time.Duration, fn func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				if e.trusted() {
					fn(ctx)
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	loop(e.cfg.ReapInterval, e.reap)
	loop(e.cfg.ReconcileInterval, e.reconcile)
	if r, ok := e.drv.(driver.Repairer); ok {
		w := &repairWalk{r: r, log: e.log, size: repairStep, rest: repairRest} // one goroutine runs its steps
		loop(e.cfg.ReconcileInterval, func(ctx context.Context) { w.step(ctx, time.Now()) })
	}
	if f, ok := e.drv.(driver.CountFolder); ok {
		loop(e.cfg.ReconcileInterval, func(ctx context.Context) {
			if err := f.FoldJobCounts(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("folding the job counts failed", "err", err)
			}
		})
	}
	if e.cfg.Retention > 0 {
		loop(e.cfg.RetentionInterval, e.retain)
	}
}

// reap moves jobs whose lease expired to stalled and on to queued or failed.
// It calls the driver until a call reaps nothing: a call may answer fewer than
// its limit while more leases have expired (the PostgreSQL driver reads 100
// drover_leases rows a call, one per claim, so after claims of one job each it
// answers 100), and stopping at the first short answer left the rest to wait a
// reap interval each 100 jobs. It stops too once the leadership is no longer
// trusted. A call may answer jobs with an error (a job the database refused
// to reap, left as it is): those jobs were reaped all the same, they count,
// and the pass goes on; the error is logged once, when the pass ends (a
// refused job comes back in every call).
func (e *Engine) reap(ctx context.Context) {
	var last error
	defer func() {
		if last != nil && ctx.Err() == nil {
			e.log.Warn("lease reaper failed", "err", last)
		}
	}()
	for ctx.Err() == nil && e.trusted() {
		jobs, err := e.drv.JobReapExpired(ctx, driver.ReapParams{Limit: 1000})
		for _, j := range jobs {
			e.log.Info("lease expired; job reaped", "job", j.ID, "attempt", j.Attempt, "now", j.Status)
		}
		e.reaped.Add(int64(len(jobs)))
		if err != nil {
			last = err
		}
		if len(jobs) == 0 {
			return
		}
	}
}

// reconcile re-publishes wake-ups for queues with claimable jobs: a lost wake-up,
// or a job whose run_at just arrived, is noticed within one period.
func (e *Engine) reconcile(ctx context.Context) {
	queues, err := e.drv.QueuesReady(ctx, nil)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("wake-up reconciler failed", "err", err)
		}
		return
	}
	if len(queues) == 0 {
		return
	}
	if err := e.drv.WakeupPublish(ctx, queues); err != nil && ctx.Err() == nil {
		e.log.Warn("wake-up reconciler failed", "err", err)
	}
	if e.cfg.Publish != nil {
		e.publish(ctx, queues)
	}
}

// publish hands queues to Config.Publish, waiting for it one reconcile interval
// at most: a transport that stops answering must not hold up the next pass (and
// its database wake-ups). The call runs on a goroutine of its own, outside the
// loops Run waits for, and its context ends with that interval, but a transport
// may ignore its context (user code, or a client stuck on a dead connection):
// called inline, it held the reconcile loop, and with it Run's stopLoops, so the
// engine neither stopped, nor resigned, nor campaigned again for as long as it
// hung. Now a stuck call delays only wake-ups through the transport: while it
// has not returned, later passes skip the transport rather than pile calls up
// behind it, and Run may return before it does.
func (e *Engine) publish(ctx context.Context, queues []string) {
	if !e.publishing.CompareAndSwap(false, true) {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, e.cfg.ReconcileInterval)
	done := make(chan error, 1)
	go func() {
		defer e.publishing.Store(false)
		defer cancel()
		done <- e.cfg.Publish(pctx, queues)
	}()
	select {
	case err := <-done:
		if err != nil && ctx.Err() == nil {
			e.log.Warn("wake-up reconciler: transport publish failed", "err", err)
		}
	case <-pctx.Done():
		if ctx.Err() == nil {
			e.log.Warn("wake-up reconciler: transport publish did not answer within the reconcile interval", "interval", e.cfg.ReconcileInterval)
		}
	}
}

// repairStep is how many jobs one repair step reads: at one step a second, a
// walk of 5M jobs takes about four minutes.
const repairStep = 20_000

// repairRest is how often a repair walk may begin (repairWalk).
const repairRest = time.Minute

// repairWalk walks the driver's repair steps through the job table in id
// order, one step a call. A walk that reaches the end of the table starts again
// no sooner than rest after it began. Before, a table smaller than a step was
// read whole every reconcile period: on PostgreSQL ~15-20 ms of the server's
// time each second for 20k jobs, for as long as the engine led, idle or not.
// Those reads came at the same moment of every second, and the jobs enqueued
// then waited behind them: at 1,000 jobs/s, 56-59% of the slowest 1% started
// in the same 60 ms of every second, against 20-30% with the rest (enqueue→start
// p99 within the noise, 6.3-6.5 against 6.2-7.0 ms; bench/compare/HISTORY.md,
// forty-second session).
type repairWalk struct {
	r     driver.Repairer
	log   *slog.Logger
	size  int // jobs a step reads
	rest  time.Duration
	after int64     // where the next step starts; 0: the next step begins a walk
	began time.Time // when the last walk began
}

// step runs the walk's next step, if it is due at now (a time.Now reading: its
// monotonic clock measures the rest). It answers whether it ran.
func (w *repairWalk) step(ctx context.Context, now time.Time) bool {
	begins := w.after == 0
	if begins && !w.began.IsZero() && now.Sub(w.began) < w.rest {
		return false
	}
	next, _, err := w.r.RepairStep(ctx, w.after, w.size)
	if err != nil {
		// Tried again at the next call: a failed step moves nothing.
		if ctx.Err() == nil {
			w.log.Warn("repair step failed", "err", err)
		}
		return true
	}
	if begins {
		w.began = now
	}
	w.after = next
	return true
}

// retain deletes finished jobs older than the retention age, in batches. It
// stops too once the leadership is no longer trusted, as the reaper does: a
// pass over a backlog is many calls, and a leader whose election loop stalled
// went on deleting past the lease it last extended, beside a successor's own
// pass and with its own retention age.
func (e *Engine) retain(ctx context.Context) {
	for ctx.Err() == nil && e.trusted() {
		// The age is measured by the database's clock, which wrote finished_at:
		// an engine whose own clock ran a day ahead deleted a day early, and
		// freed idempotency keys of jobs that had just finished.
		n, err := e.drv.JobDeleteFinished(ctx, driver.DeleteFinishedParams{OlderThan: e.cfg.Retention, Limit: 1000})
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("retention failed", "err", err)
			}
			return
		}
		if n > 0 {
			e.log.Info("retention deleted finished jobs", "count", n)
		}
		if n < 1000 {
			return
		}
	}
}

// onLeader calls Config.OnLeader, logging a panic instead of letting it end
// the process: it is user code, called from the election loop, and a panic
// there also skipped the resignation on the way out.
//
// It runs the hook on a goroutine of its own and waits for it: a hook that
// calls runtime.Goexit (t.FailNow, say), which no recover stops, then ends
// only that goroutine, not the election loop.
func (e *Engine) onLeader(leading bool) {
	if e.cfg.OnLeader == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		returned := false
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				e.log.Error("OnLeader panicked", "leading", leading, "panic", r, "stack", string(debug.Stack()))
			} else if !returned {
				e.log.Error("OnLeader called runtime.Goexit instead of returning", "leading", leading)
			}
		}()
		e.cfg.OnLeader(leading)
		returned = true
	}()
	<-done
}
