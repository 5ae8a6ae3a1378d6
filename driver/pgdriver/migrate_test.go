package pgdriver_test

import (
	"context"
	"testing"

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
	if err := d.MigrateTo(latest - 1); err != nil {
		t.Fatal(err)
	}
	// An object of the name the last migration creates makes it fail, after
	// its first statement (the trigger's drop) has run.
	const conflict = "ALTER TABLE drover_jobs ADD CONSTRAINT drover_jobs_claim_seq_live CHECK (true)"
	if _, err := d.Pool().Exec(ctx, conflict); err != nil {
		t.Fatal(err)
	}
	if err := d.MigrateUp(ctx); err == nil {
		t.Fatal("MigrateUp over a conflicting object succeeded, want the migration's error")
	}
	if st, err := d.MigrateStatus(ctx); err != nil || st.Dirty || st.Current != latest-1 {
		t.Fatalf("after the failed migration: %+v, %v; want version %d, clean", st, err, latest-1)
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
