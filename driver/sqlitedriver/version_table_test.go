package sqlitedriver

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

// An application that keeps its own tables in Drover's file (EnqueueTx needs
// them there) and migrates them with golang-migrate uses its default version
// table, schema_migrations. Drover keeps its version in a table of its own,
// drover_schema_migrations, as pgdriver does: it used schema_migrations too,
// so it read the application's version as its own (an application at 3: "no
// such table: drover_jobs" at migration 4, every start refused) and the
// application read Drover's (at 10, golang-migrate skips its migrations 1-10).
func TestVersionTableApartFromTheApplications(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(filepath.Join(t.TempDir(), "app.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	// The application's own golang-migrate table, at its version 3.
	if _, err := d.write.ExecContext(ctx, `CREATE TABLE schema_migrations (version uint64,dirty bool);
		CREATE UNIQUE INDEX version_unique ON schema_migrations (version);
		INSERT INTO schema_migrations (version, dirty) VALUES (3, 0);
		CREATE TABLE users (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatalf("MigrateUp beside an application's schema_migrations: %v", err)
	}
	st, err := d.MigrateStatus(ctx)
	if err != nil || st.Dirty || st.Current != st.Latest() {
		t.Fatalf("after MigrateUp: %+v, %v; want the latest version, clean", st, err)
	}
	var app int
	if err := d.read.QueryRowContext(ctx, "SELECT version FROM schema_migrations").Scan(&app); err != nil || app != 3 {
		t.Fatalf("the application's version after Drover's MigrateUp: %d, %v; want 3", app, err)
	}
}

// A file an earlier Drover migrated keeps Drover's version in
// schema_migrations (and has drover_jobs): MigrateUp takes that version over
// into drover_schema_migrations, applies what follows it, and leaves no
// schema_migrations behind for an application's golang-migrate to misread.
func TestVersionTableTakenOverFromAnEarlierDrover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(filepath.Join(t.TempDir(), "old.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	// As an earlier Drover left it: version 9 in schema_migrations.
	src, err := iofs.New(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	db, err := migratesqlite.WithInstance(d.write, &migratesqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(9); err != nil {
		t.Fatal(err)
	}
	src.Close()
	if st, err := d.MigrateStatus(ctx); err != nil || st.Current != 9 {
		t.Fatalf("status of an earlier Drover's file at 9: %+v, %v; want version 9", st, err)
	}
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatalf("MigrateUp of an earlier Drover's file: %v", err)
	}
	st, err := d.MigrateStatus(ctx)
	if err != nil || st.Dirty || st.Current != st.Latest() {
		t.Fatalf("after MigrateUp: %+v, %v; want the latest version, clean", st, err)
	}
	var legacy int
	if err := d.read.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE name = 'schema_migrations'").Scan(&legacy); err != nil || legacy != 0 {
		t.Fatalf("schema_migrations after the take-over: %d tables, %v; want none", legacy, err)
	}
}
