package pgdriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// oldLeaderElect is the election of a binary from before migration 015, which
// a process not yet upgraded still runs against the migrated schema.
const oldLeaderElect = `INSERT INTO drover_leader (name, leader_id, elected_at, expires_at)
VALUES ('default', $1, coalesce($3::timestamptz, now()), coalesce($3::timestamptz, now()) + $2::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE SET
    leader_id = EXCLUDED.leader_id,
    elected_at = CASE WHEN drover_leader.leader_id = EXCLUDED.leader_id THEN drover_leader.elected_at ELSE EXCLUDED.elected_at END,
    expires_at = EXCLUDED.expires_at
WHERE drover_leader.leader_id = EXCLUDED.leader_id OR drover_leader.expires_at < EXCLUDED.elected_at
RETURNING leader_id`

// Migration 015 adds the lease's token. A lease an older binary took before
// the upgrade is held until it expires (a new engine of its id has a token
// the row does not), an older binary still elects and extends against the
// new schema, and its election of an expired lease shuts out the new
// engine's token; down and up again keep the election working.
func TestMigration015LeaderToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openUnmigrated(t, testdb.PostgresURL(t))
	if err := d.MigrateTo(14); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	at := func(off time.Duration) *time.Time { x := t0.Add(off); return &x }
	ttl := 30 * time.Second
	oldElect := func(id string, now time.Duration) bool {
		t.Helper()
		var got string
		err := d.Pool().QueryRow(ctx, oldLeaderElect, id, ttl.Microseconds(), at(now)).Scan(&got)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
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
		t.Fatal("the old election on schema 14: refused, want it to lead")
	}
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatalf("MigrateUp from 14 with a lease held: %v", err)
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
	if err := d.MigrateTo(14); err != nil {
		t.Fatalf("015 down: %v", err)
	}
	if !oldElect("other", 90*time.Second) {
		t.Error("the old election after 015 down: refused")
	}
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatalf("015 up again: %v", err)
	}
	// The old binary's resign, on the id alone, frees the lease.
	if _, err := d.Pool().Exec(ctx, "DELETE FROM drover_leader WHERE name = 'default' AND leader_id = $1", "other"); err != nil {
		t.Fatal(err)
	}
	if !elect("host", "new", 91*time.Second) {
		t.Error("a new engine could not take the lease the old binary resigned")
	}
}
