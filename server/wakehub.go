package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/drover-dev/drover/driver"
)

// wakeHub shares one driver wake-up subscription among long-polling task-claims,
// waking those that wait on the queue named. It subscribes lazily, on the first
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
}

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
	h.mu.Lock()
	h.waiters[w] = struct{}{}
	if !h.running && h.ctx.Err() == nil {
		h.running = true
		go h.run()
	}
	h.mu.Unlock()
	return w.ch, func() {
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
	for w := range h.waiters {
		if queue == "" || w.queues[queue] {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}

func (h *wakeHub) close() { h.cancel() }
