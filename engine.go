package drover

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/deflog"
	"github.com/drover-dev/drover/internal/maintenance"
	"github.com/drover-dev/drover/wakeup"
)

// EngineConfig configures the maintenance engine. Zero values take defaults, and so
// do negative periods and TTLs; a positive LeaderTTL below MinLeaderTTL, or a
// positive period below 10ms, makes Run fail at once.
type EngineConfig struct {
	// ID is this process's candidate id [host-pid-random], the leader's name
	// in the lease row. Two engines may share one (a hostname, a copied
	// config): each Run takes a random token the lease row keeps, and only
	// that Run extends or resigns the lease, so the other waits until it is
	// free or expired, as an engine of another ID does.
	ID                string
	LeaderTTL         time.Duration      // leadership lease; a successor takes over within ~TTL of a crash [15s]
	ReapInterval      time.Duration      // lease reaper period [1s]
	ReconcileInterval time.Duration      // wake-up reconciler period [1s]
	Retention         time.Duration      // age after which finished jobs are deleted; negative: never; at least MinRetention [7 days]
	Logger            *slog.Logger       // [the Client's]
	OnLeader          func(leading bool) // called when leadership is won or lost
	// Wakeups, when set, also gets the reconciler's queue-level pointers, so a
	// pointer that a transport lost, or a job whose run_at arrived, is noticed
	// within ReconcileInterval.
	Wakeups wakeup.Transport
}

// MinLeaderTTL is the shortest EngineConfig.LeaderTTL, as 100ms is the shortest
// worker lease. Below it an engine campaigned in a loop against the database
// (at 1ns, tens of thousands of elections a second) and never held a lease
// long enough to trust it, so no reaper ever ran: a crashed worker's jobs
// stayed running for good. Exported so a program can refuse a setting before
// it opens anything.
const MinLeaderTTL = 100 * time.Millisecond

// MinRetention is the shortest EngineConfig.Retention. Below it a unit slip
// (7 meant as days is 7ns; 604800000 meant as seconds is 0.6 s) deleted every
// finished job as it finished: its result unread, and its idempotency key free
// again for a retried enqueue to run it twice.
const MinRetention = time.Second

// Engine runs the maintenance loops — lease reaper, retention, wake-up reconciler —
// in exactly one of any number of processes, elected through a lease row.
type Engine struct {
	e       *maintenance.Engine
	err     error // the config's fault, which Run answers with
	log     *slog.Logger
	running atomic.Bool // a Run has not returned yet
}

// NewEngine returns an engine over the client's database. An ID that is not
// one a worker could have (see WorkerConfig.ID) makes Run fail at once.
func NewEngine(c *Client, cfg *EngineConfig) *Engine {
	if c == nil {
		// Refused by Run, as a config at fault is (it panicked here).
		return &Engine{e: maintenance.New(nil, maintenance.Config{}),
			err: driver.Invalid("client", "is nil: NewEngine needs the Client of the database it maintains"), log: deflog.New()}
	}
	if cfg == nil {
		cfg = &EngineConfig{}
	}
	id := cfg.ID
	if id == "" {
		id = defaultWorkerID()
	}
	// On PostgreSQL an id that is not UTF-8 never won the election, only
	// logged, so no reaper ran; SQLite took it.
	err := driver.ValidateWorkerID("id", id)
	if err == nil {
		err = checkEngineTimings(cfg)
	}
	log := cfg.Logger
	if log == nil {
		log = c.log
	}
	mc := maintenance.Config{
		ID: id, LeaderTTL: cfg.LeaderTTL, ReapInterval: cfg.ReapInterval, ReconcileInterval: cfg.ReconcileInterval,
		Retention: cfg.Retention, Logger: log, OnLeader: cfg.OnLeader,
	}
	if t := cfg.Wakeups; t != nil {
		mc.Publish = func(ctx context.Context, queues []string) error {
			ps := make([]wakeup.Pointer, len(queues))
			for i, q := range queues {
				ps[i] = wakeup.Pointer{Queue: q}
			}
			return publishSafely(ctx, t, ps)
		}
	}
	return &Engine{e: maintenance.New(c.drv, mc), err: err, log: log}
}

// checkEngineTimings refuses a lease or period so short that the engine would
// query in a loop (a period of 1 meant as a second is a nanosecond), and a
// retention so short it is surely a unit slip.
func checkEngineTimings(cfg *EngineConfig) error {
	if d := cfg.LeaderTTL; d > 0 && d < MinLeaderTTL {
		return driver.Invalid("leader_ttl", "%s is below %s", d, MinLeaderTTL)
	}
	if d := cfg.Retention; d > 0 && d < MinRetention {
		return driver.Invalid("retention", "%s is below %s (negative keeps finished jobs for ever)", d, MinRetention)
	}
	for _, p := range []struct {
		field string
		d     time.Duration
	}{{"reap_interval", cfg.ReapInterval}, {"reconcile_interval", cfg.ReconcileInterval}} {
		if p.d > 0 && p.d < minInterval {
			return driver.Invalid(p.field, "%s, must be at least %s", p.d, minInterval)
		}
	}
	return nil
}

// Run runs until ctx ends, then resigns leadership, and returns nil; with a
// config NewEngine found at fault, it returns that ValidationError at once.
// An engine runs once at a time: a Run while another has not returned fails at
// once (a second one campaigned under the same ID, so both led, OnLeader(true)
// came twice, and the first to return resigned the lease the other still
// acted on). Once Run has returned, the engine may run again.
func (e *Engine) Run(ctx context.Context) error {
	err := e.err
	if err == nil && !e.running.CompareAndSwap(false, true) {
		err = errEngineRunning
	}
	if err != nil {
		// Logged too: a caller that runs it in a goroutine often drops the result.
		e.log.Error("engine not started", "err", err)
		return err
	}
	defer e.running.Store(false)
	e.e.Run(ctx)
	return nil
}

var errEngineRunning = errors.New("drover: engine already running; an Engine runs once at a time (make another with NewEngine)")

// IsLeader reports whether this engine leads now.
func (e *Engine) IsLeader() bool { return e.e.IsLeader() }
