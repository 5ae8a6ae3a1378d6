package pgdriver_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/internal/testdb"
)

// A migration and the version row that records it commit together: a
// migration that fails (or a process killed during one) leaves the schema at
// the version before it, clean, and the next MigrateUp applies it.
// golang-migrate's Up marked the version dirty first, in a transaction of its
// own, and every later migration refused the schema.
func TestMigrationFailureLeavesTheVersionClean(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openUnmigrated(t, testdb.PostgresURL(t))
	st, err := d.MigrateStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	latest := st.Latest()
	// Migration 013 is the one that fails here: its first statement drops a
	// trigger, its second adds a constraint.
	const before = 12
	if err := d.MigrateTo(before); err != nil {
		t.Fatal(err)
	}
	// An object of the name migration 013 creates makes it fail, after its
	// first statement (the trigger's drop) has run.
	const conflict = "ALTER TABLE drover_jobs ADD CONSTRAINT drover_jobs_claim_seq_live CHECK (true)"
	if _, err := d.Pool().Exec(ctx, conflict); err != nil {
		t.Fatal(err)
	}
	if err := d.MigrateUp(ctx); err == nil {
		t.Fatal("MigrateUp over a conflicting object succeeded, want the migration's error")
	}
	if st, err := d.MigrateStatus(ctx); err != nil || st.Dirty || st.Current != before {
		t.Fatalf("after the failed migration: %+v, %v; want version %d, clean", st, err, before)
	}
	var triggers int
	if err := d.Pool().QueryRow(ctx, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'drover_jobs'::regclass AND tgname = 'drover_jobs_claim_event_out'").Scan(&triggers); err != nil || triggers != 1 {
		t.Fatalf("after the failed migration drover_jobs has %d claim-event triggers (%v); want its drop rolled back", triggers, err)
	}
	if _, err := d.Pool().Exec(ctx, "ALTER TABLE drover_jobs DROP CONSTRAINT drover_jobs_claim_seq_live"); err != nil {
		t.Fatal(err)
	}
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatalf("MigrateUp once the conflict is gone: %v", err)
	}
	if st, err := d.MigrateStatus(ctx); err != nil || st.Dirty || st.Current != latest {
		t.Fatalf("after the retried migration: %+v, %v; want version %d, clean", st, err, latest)
	}
}

// Migration 014 writes two of the job row's CHECKs more cheaply; they must
// refuse and accept the same rows as before, both ways.
func TestMigration014ChecksTheSameRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openUnmigrated(t, testdb.PostgresURL(t))
	refused := []struct{ set, constraint string }{
		{"status = 'bogus'", "drover_jobs_status_known"},
		{"status = 'running'", "drover_jobs_lease_only_when_leased"}, // no lease
		{"status = 'claimed', owner = 'w', lease_token = gen_random_uuid()", "drover_jobs_lease_only_when_leased"},
		{"owner = 'w'", "drover_jobs_lease_only_when_leased"}, // queued with an owner
		{"lease_expires_at = now()", "drover_jobs_lease_only_when_leased"},
	}
	accepted := []string{
		"status = 'running', owner = 'w', lease_token = gen_random_uuid(), lease_expires_at = now()",
		"status = 'claimed', owner = 'w', lease_token = gen_random_uuid(), lease_expires_at = now()",
		"status = 'paused'",
		"status = 'skipped', finished_at = now()",
	}
	for _, v := range []uint{14, 13, 14} {
		if err := d.MigrateTo(v); err != nil {
			t.Fatalf("migrate to %d: %v", v, err)
		}
		var id int64
		if err := d.Pool().QueryRow(ctx, `INSERT INTO drover_jobs (kind, queue, status, run_at, max_attempts)
			VALUES ('k', 'q', 'queued', now(), 1) RETURNING id`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		for _, r := range refused {
			_, err := d.Pool().Exec(ctx, "UPDATE drover_jobs SET "+r.set+" WHERE id = $1", id)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != r.constraint {
				t.Errorf("version %d: SET %s: %v, want a violation of %s", v, r.set, err, r.constraint)
			}
		}
		for _, set := range accepted {
			if _, err := d.Pool().Exec(ctx, "UPDATE drover_jobs SET "+set+" WHERE id = $1", id); err != nil {
				t.Errorf("version %d: SET %s: %v, want it accepted", v, set, err)
			}
			if _, err := d.Pool().Exec(ctx, `UPDATE drover_jobs SET status = 'queued', owner = NULL, lease_token = NULL,
				lease_expires_at = NULL, finished_at = NULL WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
		}
	}
}
