package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
)

// oldLeaderElect is the election of a binary from before migration 011, which
// a process not yet upgraded still runs against the migrated file.
const oldLeaderElect = `INSERT INTO drover_leader (name, leader_id, elected_at, expires_at)
VALUES ('default', :leader_id, :now, :expires_at)
ON CONFLICT (name) DO UPDATE
SET leader_id = excluded.leader_id,
    elected_at = CASE WHEN drover_leader.leader_id = excluded.leader_id THEN drover_leader.elected_at ELSE excluded.elected_at END,
    expires_at = excluded.expires_at
WHERE drover_leader.leader_id = excluded.leader_id OR drover_leader.expires_at < excluded.elected_at
RETURNING leader_id`

// Migration 011 adds the lease's token. A lease an older binary took before
// the upgrade is held until it expires (a new engine of its id has a token
// the row does not), an older binary still elects and extends against the
// new schema, and its election of an expired lease shuts out the new
// engine's token; down and up again keep the election working.
func TestMigration011LeaderToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(filepath.Join(t.TempDir(), "drover.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	migrateTo(t, d, 10)
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	at := func(off time.Duration) *time.Time { x := t0.Add(off); return &x }
	ttl := 30 * time.Second
	oldElect := func(id string, now time.Duration) bool {
		t.Helper()
		var got string
		err := d.write.QueryRowContext(ctx, oldLeaderElect, sql.Named("leader_id", id),
			sql.Named("now", micros(*at(now))), sql.Named("expires_at", micros(at(now).Add(ttl)))).Scan(&got)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("the old election as %s at t0+%s: %v", id, now, err)
		}
		return got == id
	}
	elect := func(id, token string, now time.Duration) bool {
		t.Helper()
		ok, err := d.LeaderAttemptElect(ctx, driver.LeaderParams{ID: id, Token: token, TTL: ttl, Now: at(now)})
		if err != nil {
			t.Fatalf("LeaderAttemptElect(%s, %s, t0+%s): %v", id, token, now, err)
		}
		return ok
	}
	if !oldElect("host", 0) {
		t.Fatal("the old election on schema 10: refused, want it to lead")
	}
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatalf("MigrateUp from 10 with a lease held: %v", err)
	}
	if elect("host", "new", time.Second) {
		t.Error("a new engine of the old lease's id led at once; want it to wait for the lease the old binary holds")
	}
	if !oldElect("host", 10*time.Second) {
		t.Error("the old binary could not extend its lease on the migrated schema")
	}
	if elect("host", "new", 39*time.Second) {
		t.Error("a new engine took the lease the old binary extended to t0+40s, at t0+39s")
	}
	if !elect("host", "new", 41*time.Second) {
		t.Error("a new engine could not take the expired lease at t0+41s")
	}
	if !elect("host", "new", 50*time.Second) {
		t.Error("the new engine could not extend its lease")
	}
	// The old binary of another id takes the lease once expired; the new
	// engine no longer extends it.
	if !oldElect("other", 81*time.Second) {
		t.Fatal("the old binary could not take an expired lease on the migrated schema")
	}
	if elect("host", "new", 82*time.Second) {
		t.Error("the new engine extended a lease the old binary of another id took")
	}
	migrateTo(t, d, 10)
	if !oldElect("other", 90*time.Second) {
		t.Error("the old election after 011 down: refused")
	}
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatalf("011 up again: %v", err)
	}
	// The old binary's resign, on the id alone, frees the lease.
	if _, err := d.write.ExecContext(ctx, "DELETE FROM drover_leader WHERE name = 'default' AND leader_id = ?", "other"); err != nil {
		t.Fatal(err)
	}
	if !elect("host", "new", 91*time.Second) {
		t.Error("a new engine could not take the lease the old binary resigned")
	}
}
