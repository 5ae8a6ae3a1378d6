package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/driver"
)

// LeaderAttemptElect makes ID the leader under Token for TTL if there is no
// leader or its lease expired, or extends the lease if ID leads already under
// Token; it reports whether ID leads under Token. One upsert decides, so two
// electors cannot both win.
func (d *Driver) LeaderAttemptElect(ctx context.Context, p driver.LeaderParams) (bool, error) {
	if p.ID == "" {
		return false, fmt.Errorf("elect leader: %w", driver.Invalid("id", "must not be empty"))
	}
	now := clock(p.Now)
	var leader, token string
	err := d.write.QueryRowContext(ctx, queries.Get("LeaderAttemptElect"),
		sql.Named("leader_id", p.ID),
		sql.Named("token", p.Token),
		sql.Named("now", micros(now)),
		sql.Named("expires_at", micros(now.Add(p.TTL))),
	).Scan(&leader, &token)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("elect leader %q: %w", p.ID, err)
	}
	return leader == p.ID && token == p.Token, nil
}

// LeaderResign gives up leadership if id holds it under token; otherwise it
// does nothing.
func (d *Driver) LeaderResign(ctx context.Context, id, token string) error {
	if _, err := d.write.ExecContext(ctx, queries.Get("LeaderResign"), sql.Named("leader_id", id), sql.Named("token", token)); err != nil {
		return fmt.Errorf("resign leader %q: %w", id, err)
	}
	return nil
}

// LeaderGet returns the current leadership lease, which may have expired;
// ErrNotFound if there is none.
func (d *Driver) LeaderGet(ctx context.Context) (driver.Leader, error) {
	var l driver.Leader
	var expires int64
	err := d.read.QueryRowContext(ctx, queries.Get("LeaderGet")).Scan(&l.ID, &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return driver.Leader{}, fmt.Errorf("leader: %w", driver.ErrNotFound)
	case err != nil:
		return driver.Leader{}, fmt.Errorf("leader: %w", err)
	}
	l.ExpiresAt = fromMicros(expires)
	return l, nil
}
