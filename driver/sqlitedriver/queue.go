package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// QueueList returns every queue that has jobs or a pause record, sorted by name,
// with its non-zero counts per status.
func (d *Driver) QueueList(ctx context.Context) ([]driver.QueueInfo, error) {
	rows, err := d.read.QueryContext(ctx, queries.Get("QueueList"))
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	defer rows.Close()
	out := []driver.QueueInfo{}
	for rows.Next() {
		var name string
		var paused bool
		var status sql.NullString
		var count int
		if err := rows.Scan(&name, &paused, &status, &count); err != nil {
			return nil, fmt.Errorf("list queues: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].Name != name {
			out = append(out, driver.QueueInfo{Name: name, Paused: paused, Counts: map[lifecycle.Status]int{}})
		}
		if status.Valid && count > 0 { // NULL status: a paused queue without jobs
			out[len(out)-1].Counts[lifecycle.Status(status.String)] = count
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	return out, nil
}

// QueuePause stops claims from the queue; its jobs stay queued.
func (d *Driver) QueuePause(ctx context.Context, name string) error {
	return d.setPaused(ctx, name, true)
}

// QueueResume lets workers claim from the queue again and wakes them.
func (d *Driver) QueueResume(ctx context.Context, name string) error {
	if err := d.setPaused(ctx, name, false); err != nil {
		return err
	}
	d.wake.publish([]string{name})
	return nil
}

func (d *Driver) setPaused(ctx context.Context, name string, paused bool) error {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	if err := driver.ValidateName("queue", name); err != nil {
		return fmt.Errorf("%s queue: %w", verb, err)
	}
	set := "QueueSetResumed"
	if paused {
		set = "QueueSetPaused"
	}
	_, err := d.write.ExecContext(ctx, queries.Get(set),
		sql.Named("name", name), sql.Named("paused", paused), sql.Named("now", micros(time.Now())))
	if err != nil {
		return fmt.Errorf("%s queue %q: %w", verb, name, err)
	}
	return nil
}

// QueuesReady returns the unpaused queues that have claimable jobs at now
// (the process clock when nil), sorted.
func (d *Driver) QueuesReady(ctx context.Context, now *time.Time) ([]string, error) {
	rows, err := d.read.QueryContext(ctx, queries.Get("QueuesReady"), sql.Named("now", micros(clock(now))))
	if err != nil {
		return nil, fmt.Errorf("ready queues: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			return nil, fmt.Errorf("ready queues: %w", err)
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ready queues: %w", err)
	}
	return out, nil
}
