package pgdriver

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// QueueList implements driver.Driver. The counts are drover_job_counts plus
// the changes not yet folded into it (migration 017, QueueCounts): a read of a
// row per queue and status, not of every job.
func (d *Driver) QueueList(ctx context.Context) ([]driver.QueueInfo, error) {
	byName := map[string]*driver.QueueInfo{}
	get := func(name string) *driver.QueueInfo {
		q := byName[name]
		if q == nil {
			q = &driver.QueueInfo{Name: name, Counts: map[lifecycle.Status]int{}}
			byName[name] = q
		}
		return q
	}
	rows, err := d.pool.Query(ctx, queries.Get("QueueCounts"))
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	for rows.Next() {
		var name, status string
		var n int
		if err := rows.Scan(&name, &status, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list queues: %w", err)
		}
		get(name).Counts[lifecycle.Status(status)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	rows, err = d.pool.Query(ctx, queries.Get("QueuePausedList"))
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	for rows.Next() {
		var name string
		var paused bool
		if err := rows.Scan(&name, &paused); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list queues: %w", err)
		}
		get(name).Paused = paused
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	out := make([]driver.QueueInfo, 0, len(byName))
	for _, q := range byName {
		out = append(out, *q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

var _ driver.CountFolder = (*Driver)(nil)

// FoldJobCounts implements driver.CountFolder.
func (d *Driver) FoldJobCounts(ctx context.Context) error {
	if _, err := d.pool.Exec(ctx, queries.Get("JobCountsFold")); err != nil {
		return fmt.Errorf("fold the job counts: %w", err)
	}
	return nil
}

// QueuePause implements driver.Driver.
func (d *Driver) QueuePause(ctx context.Context, name string) error {
	return d.setPaused(ctx, name, true)
}

// QueueResume implements driver.Driver.
func (d *Driver) QueueResume(ctx context.Context, name string) error {
	if err := d.setPaused(ctx, name, false); err != nil {
		return err
	}
	return d.WakeupPublish(ctx, []string{name})
}

func (d *Driver) setPaused(ctx context.Context, name string, paused bool) error {
	if err := driver.ValidateName("queue", name); err != nil {
		return err
	}
	b := &pgx.Batch{}
	if paused {
		// Waits for the claims of the queue under way (queuePauseLock).
		b.Queue(queries.Get("QueuePauseLock"), queuePauseLock, name)
	}
	set := "QueueSetResumed"
	if paused {
		set = "QueueSetPaused"
	}
	b.Queue(queries.Get(set), name, paused)
	if err := d.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("set queue %q paused=%t: %w", name, paused, err)
	}
	return nil
}

// QueuesReady implements driver.Driver.
func (d *Driver) QueuesReady(ctx context.Context, now *time.Time) ([]string, error) {
	rows, err := d.pool.Query(ctx, queries.Get("QueuesReady"), pgx.QueryExecModeExec, nowArg(now))
	if err != nil {
		return nil, fmt.Errorf("ready queues: %w", err)
	}
	var out []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ready queues: %w", err)
		}
		out = append(out, q)
	}
	return out, rows.Err()
}

// LeaderAttemptElect implements driver.Driver.
func (d *Driver) LeaderAttemptElect(ctx context.Context, p driver.LeaderParams) (bool, error) {
	var id, token string
	err := d.pool.QueryRow(ctx, queries.Get("LeaderAttemptElect"), p.ID, micros(p.TTL), nowArg(p.Now), p.Token).Scan(&id, &token)
	if isNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("elect leader: %w", err)
	}
	return id == p.ID && token == p.Token, nil
}

// LeaderResign implements driver.Driver.
func (d *Driver) LeaderResign(ctx context.Context, id, token string) error {
	if _, err := d.pool.Exec(ctx, queries.Get("LeaderResign"), id, token); err != nil {
		return fmt.Errorf("resign leadership: %w", err)
	}
	return nil
}

// LeaderGet implements driver.Driver.
func (d *Driver) LeaderGet(ctx context.Context) (driver.Leader, error) {
	var l driver.Leader
	err := d.pool.QueryRow(ctx, queries.Get("LeaderGet")).Scan(&l.ID, &l.ExpiresAt)
	if isNoRows(err) {
		return l, fmt.Errorf("leader: %w", driver.ErrNotFound)
	}
	if err != nil {
		return l, fmt.Errorf("leader: %w", err)
	}
	l.ExpiresAt = l.ExpiresAt.UTC()
	return l, nil
}
