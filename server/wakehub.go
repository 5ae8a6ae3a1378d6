package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/drover-dev/drover/driver"
)

// wakeHub shares one driver wake-up subscription among long-polling task-claims,
// waking those that wait on the queue named, and task-cancels, which it tells
// the jobs a cancel named (driver.CanceledWakeup). It subscribes lazily, on the first
// waiter, and resubscribes if the subscription ends; each time it has
// subscribed it wakes every waiter once, for what was sent before it listened.
type wakeHub struct {
	drv driver.Driver
	log *slog.Logger

	mu      sync.Mutex
	waiters map[*waiter]struct{}
	running bool
	ctx     context.Context
	cancel  context.CancelFunc
}

type waiter struct {
	queues map[string]bool
	ch     chan struct{}
	// canceled, for a task-cancels' waiter (which names no queue), receives
	// the ids of the jobs canceled.
	canceled chan int64
}

// canceledBuffer is how many canceled jobs a task-cancels' waiter holds
// before it answers; more are dropped (a pointer: the job's holder hears of
// its cancel at its next heartbeat).
const canceledBuffer = 256

func newWakeHub(drv driver.Driver, log *slog.Logger) *wakeHub {
	ctx, cancel := context.WithCancel(context.Background())
	return &wakeHub{drv: drv, log: log, waiters: map[*waiter]struct{}{}, ctx: ctx, cancel: cancel}
}

// subscribe returns a channel that receives when any of queues may have work, and
// a function to stop.
func (h *wakeHub) subscribe(queues []string) (<-chan struct{}, func()) {
	w := &waiter{queues: map[string]bool{}, ch: make(chan struct{}, 1)}
	for _, q := range queues {
		w.queues[q] = true
	}
	return w.ch, h.add(w)
}

// subscribeCanceled returns a channel that receives the ids of jobs canceled
// after a claim, and a function to stop.
func (h *wakeHub) subscribeCanceled() (<-chan int64, func()) {
	w := &waiter{canceled: make(chan int64, canceledBuffer)}
	return w.canceled, h.add(w)
}

// add adds w, subscribing to the driver's wake-ups if that is not under way,
// and returns the function that removes it.
func (h *wakeHub) add(w *waiter) func() {
	h.mu.Lock()
	h.waiters[w] = struct{}{}
	if !h.running && h.ctx.Err() == nil {
		h.running = true
		go h.run()
	}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.waiters, w)
		h.mu.Unlock()
	}
}

func (h *wakeHub) run() {
	for h.ctx.Err() == nil {
		sub, err := h.drv.WakeupSubscribe(h.ctx)
		if err != nil {
			h.log.Warn("wake-up subscription failed; long-polls fall back to polling", "err", err)
			select {
			case <-h.ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		// A wake-up sent before the subscription listened is lost, and a
		// long poll may have claimed nothing just before it (the first one
		// subscribes as it begins; a replica's enqueue meanwhile woke
		// nobody, and it slept to its next poll): wake every waiter once to
		// claim again.
		h.notify("")
		began := time.Now()
		for q := range sub {
			h.notify(q)
		}
		if time.Since(began) < time.Second {
			// Ended at once (a closed driver, say): do not spin on it.
			select {
			case <-h.ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (h *wakeHub) notify(queue string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if id, ok := driver.WakeupCanceled(queue); ok {
		for w := range h.waiters {
			if w.canceled != nil {
				select {
				case w.canceled <- id:
				default:
				}
			}
		}
		return
	}
	for w := range h.waiters {
		if w.canceled == nil && (queue == "" || w.queues[queue]) {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}

func (h *wakeHub) close() { h.cancel() }
