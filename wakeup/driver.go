package wakeup

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/drover-dev/drover/driver"
)

// FromDriver returns a Transport over the driver's own wake-ups (WakeupPublish and
// WakeupSubscribe): in-process for SQLite, LISTEN/NOTIFY for PostgreSQL. Pointers
// are queue-level: Publish sends each distinct queue once and drops job ids, every
// delivered Message has JobID 0, and Ack does nothing, since these wake-ups are
// never redelivered. Every subscriber gets every pointer of its queues. Close ends
// subscriptions but leaves the driver open: the caller owns it.
func FromDriver(d driver.Driver) Transport {
	return &driverTransport{d: d, closed: make(chan struct{})}
}

type driverTransport struct {
	d         driver.Driver
	closeOnce sync.Once
	closed    chan struct{}
}

// driverBuffer is how far a subscriber may fall behind before it blocks its
// forwarder; the driver then drops names, which is safe because receivers poll.
const driverBuffer = 64

func (t *driverTransport) Publish(ctx context.Context, ps []Pointer) error {
	queues := make([]string, 0, len(ps))
	for _, p := range ps {
		if !slices.Contains(queues, p.Queue) {
			queues = append(queues, p.Queue)
		}
	}
	if len(queues) == 0 {
		return nil
	}
	return t.d.WakeupPublish(ctx, queues)
}

func (t *driverTransport) Subscribe(ctx context.Context, queues []string) (<-chan Message, error) {
	if len(queues) == 0 {
		return nil, errors.New("wakeup: subscribe: no queues")
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() { // Close ends the subscription through its context
		select {
		case <-t.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	names, err := t.d.WakeupSubscribe(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	want := slices.Compact(slices.Sorted(slices.Values(queues)))
	out := make(chan Message, driverBuffer)
	go func() {
		defer close(out)
		defer cancel()
		for name := range names {
			for _, q := range want {
				// "" is the driver's "maybe any queue", e.g. after a LISTEN reconnect.
				if name != "" && name != q {
					continue
				}
				select {
				case out <- Message{Pointer: Pointer{Queue: q}}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func (t *driverTransport) Close() error {
	t.closeOnce.Do(func() { close(t.closed) })
	return nil
}
