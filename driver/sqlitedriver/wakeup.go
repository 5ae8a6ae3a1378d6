package sqlitedriver

import (
	"context"
	"sync"
)

// wakeupBuffer is how many queue names a slow subscriber may fall behind by
// before names are dropped. Dropping is safe: wake-ups are only pointers and
// workers also poll.
const wakeupBuffer = 64

// broadcaster fans queue names out to in-process subscribers. SQLite has no
// server to relay notifications between processes, so wake-ups reach only the
// workers of this process; workers of other processes find jobs by polling.
type broadcaster struct {
	mu     sync.Mutex
	subs   map[chan string]struct{}
	closed bool
	done   chan struct{} // closed with the broadcaster, ends the ctx watchers
}

func newBroadcaster() *broadcaster {
	return &broadcaster{subs: map[chan string]struct{}{}, done: make(chan struct{})}
}

// publish sends each name to every subscriber without blocking.
func (b *broadcaster) publish(queues []string) {
	if len(queues) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		for _, q := range queues {
			select {
			case ch <- q:
			default: // full: the subscriber will poll
			}
		}
	}
}

// subscribe returns a channel that is closed when ctx ends or the broadcaster closes.
func (b *broadcaster) subscribe(ctx context.Context) <-chan string {
	ch := make(chan string, wakeupBuffer)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		close(ch)
		return ch
	}
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
			b.remove(ch)
		case <-b.done:
		}
	}()
	return ch
}

func (b *broadcaster) remove(ch chan string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[ch]; ok {
		delete(b.subs, ch)
		close(ch)
	}
}

func (b *broadcaster) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	close(b.done)
	for ch := range b.subs {
		delete(b.subs, ch)
		close(ch)
	}
}

// WakeupPublish tells this process's subscribers that queues may have claimable jobs.
func (d *Driver) WakeupPublish(ctx context.Context, queues []string) error {
	d.wake.publish(queues)
	return nil
}

// WakeupSubscribe returns a channel of queue names, closed when ctx ends or the
// driver closes. Delivery is best effort and in-process only.
func (d *Driver) WakeupSubscribe(ctx context.Context) (<-chan string, error) {
	return d.wake.subscribe(ctx), nil
}
