package pgdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4/database"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/internal/testdb"
)

// MigrateStatus only looks: while another session holds the migration lock (a
// migrate up running, or waiting for a table's lock) it answers the version
// the schema is at, within its ctx, and on a schema never migrated it creates
// nothing. Through golang-migrate it waited for the lock whatever its ctx, and
// so did every CLI command that opens the database.
func TestMigrateStatusDoesNotWaitForAMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openUnmigrated(t, testdb.PostgresURL(t))
	unlock := holdMigrationLock(t, d)
	st := statusWithin(t, d)
	var tables int
	if err := d.Pool().QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").Scan(&tables); err != nil || tables != 0 {
		t.Errorf("MigrateStatus of a schema never migrated left %d tables (%v), want none", tables, err)
	}
	if st.Current != 0 || st.Dirty {
		t.Errorf("status of a schema never migrated: %+v, want version 0, clean", st)
	}
	unlock()
	if err := d.MigrateTo(12); err != nil {
		t.Fatal(err)
	}
	unlock = holdMigrationLock(t, d)
	defer unlock()
	if st := statusWithin(t, d); st.Current != 12 || st.Dirty || st.Latest() <= 12 {
		t.Errorf("status while the migration lock is held: %+v, want version 12, clean", st)
	}
}

// statusWithin is d.MigrateStatus, failing t if it does not answer within
// seconds.
func statusWithin(t *testing.T, d *pgdriver.Driver) driver.MigrationStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	type answer struct {
		st  driver.MigrationStatus
		err error
	}
	done := make(chan answer, 1)
	go func() {
		st, err := d.MigrateStatus(ctx)
		done <- answer{st, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			t.Fatalf("MigrateStatus while the migration lock is held: %v", a.err)
		}
		return a.st
	case <-time.After(10 * time.Second):
		t.Fatal("MigrateStatus still waits for the migration lock 5 s after its context ended")
	}
	return driver.MigrationStatus{}
}

// holdMigrationLock takes the advisory lock MigrateUp (and golang-migrate)
// take for d's schema, on a session of its own, until the returned func (or
// t's end) lets it go.
func holdMigrationLock(t *testing.T, d *pgdriver.Driver) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	c, err := d.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var db, schema string
	if err := c.QueryRow(ctx, "SELECT current_database(), current_schema()").Scan(&db, &schema); err != nil {
		t.Fatal(err)
	}
	id, err := database.GenerateAdvisoryLockId(db, schema, "drover_schema_migrations")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "SELECT pg_advisory_lock($1::bigint)", id); err != nil {
		t.Fatal(err)
	}
	done := false
	unlock = func() {
		if done {
			return
		}
		done = true
		_, _ = c.Exec(ctx, "SELECT pg_advisory_unlock($1::bigint)", id)
		c.Release()
	}
	t.Cleanup(unlock)
	return unlock
}

// Regression: migrators that start together (here four, each on a pool of its
// own, as processes are) take turns on the migration lock: each migration is
// applied once, every MigrateUp succeeds, and the schema ends at the latest
// version, clean.
func TestConcurrentMigrateUpAppliesEachMigrationOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.PostgresURL(t)
	const n = 4
	ds := make([]*pgdriver.Driver, n)
	for i := range ds {
		ds[i] = openUnmigrated(t, url)
	}
	errs := make(chan error, n)
	start := make(chan struct{})
	for _, d := range ds {
		go func() {
			<-start
			errs <- d.MigrateUp(ctx)
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("a concurrent MigrateUp: %v", err)
		}
	}
	st, err := ds[0].MigrateStatus(ctx)
	if err != nil || st.Dirty || st.Current != st.Latest() {
		t.Fatalf("after concurrent migrations: %+v, %v; want the latest version, clean", st, err)
	}
	var rows int
	if err := ds[0].Pool().QueryRow(ctx, "SELECT count(*) FROM drover_schema_migrations").Scan(&rows); err != nil || rows != 1 {
		t.Errorf("the version table has %d rows (%v), want 1", rows, err)
	}
}
