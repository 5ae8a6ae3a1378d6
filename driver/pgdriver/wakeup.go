package pgdriver

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// WakeupPublish implements driver.Driver with NOTIFY.
func (d *Driver) WakeupPublish(ctx context.Context, queues []string) error {
	if len(queues) == 0 {
		return nil
	}
	if _, err := d.pool.Exec(ctx, queries.Get("WakeupPublish"), d.channel, queues); err != nil {
		return fmt.Errorf("publish wake-up: %w", err)
	}
	return nil
}

// WakeupSubscribe implements driver.Driver with LISTEN on a dedicated connection,
// reconnecting with backoff until ctx ends or the driver closes; then the
// connection is closed, and the channel after it. Notifications that arrive
// while the connection is down are lost; workers poll, so nothing else is.
// After Close it returns a closed channel.
func (d *Driver) WakeupSubscribe(ctx context.Context) (<-chan string, error) {
	d.subsMu.Lock()
	if d.closed.Load() {
		d.subsMu.Unlock()
		ch := make(chan string)
		close(ch)
		return ch, nil
	}
	d.subs.Add(1)
	d.subsMu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.life, cancel)
	conn, err := d.listen(ctx)
	if err != nil {
		stop()
		cancel()
		d.subs.Done()
		return nil, err
	}
	ch := make(chan string, 64)
	go func() {
		defer d.subs.Done()
		defer cancel()
		defer stop()
		defer close(ch)
		backoff := 100 * time.Millisecond
		for {
			if conn == nil {
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				if conn, err = d.listen(ctx); err != nil {
					d.log.Warn("wake-up listener: reconnect failed", "err", err)
					backoff = min(2*backoff, 5*time.Second)
					continue
				}
				backoff = 100 * time.Millisecond
				// We may have missed notifications while down: wake everyone once.
				send(ch, "")
			}
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = conn.Close(closeCtx)
				cancel()
				conn = nil
				if ctx.Err() != nil {
					return
				}
				d.log.Warn("wake-up listener: connection lost", "err", err)
				continue
			}
			send(ch, n.Payload)
		}
	}()
	return ch, nil
}

func (d *Driver) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("wake-up listener: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{d.channel}.Sanitize()); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("wake-up listener: %w", err)
	}
	return conn, nil
}

// send never blocks: a full buffer already holds a wake-up.
func send(ch chan<- string, q string) {
	select {
	case ch <- q:
	default:
	}
}
