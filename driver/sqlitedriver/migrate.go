package sqlitedriver

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/drover-dev/drover/driver"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrateWait bounds how long MigrateUp waits for another migrator's
// transaction (each wait at BEGIN lasts busy_timeout, then is tried again).
const migrateWait = 2 * time.Minute

// MigrateUp applies all pending migrations. It is safe to call concurrently from
// several goroutines or processes on the same file.
//
// Every pending migration, with the version row that records it, runs in one
// write transaction, which reads the version inside it: SQLite's own write
// lock serialises migrators, a later one finds the work done, and a migrator
// killed part-way leaves the file as it found it, its lock gone with its
// process. (Earlier versions took a lease row first, and one killed while it
// held the row held up every process on the file, each start included, for the
// lease's ten minutes; their lock table is left alone, for them.)
//
// A file already at this build's version is left alone without a write
// transaction: every command and every process start migrates.
func (d *Driver) MigrateUp(ctx context.Context) error {
	if st, legacy, err := d.status(ctx); err == nil && !legacy && !st.Dirty && st.Current > 0 && st.Current == st.Latest() {
		return nil
	}
	src, err := iofs.New(migrationFS, "migrations")
	if err != nil {
		return fmt.Errorf("migrate sqlite: %w", err)
	}
	defer src.Close()
	versions, err := available(src)
	if err != nil {
		return fmt.Errorf("migrate sqlite: %w", err)
	}
	bodies := make(map[uint]string, len(versions))
	for _, v := range versions {
		r, _, err := src.ReadUp(v)
		if err != nil {
			return fmt.Errorf("migrate sqlite: read migration %d: %w", v, err)
		}
		body, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return fmt.Errorf("migrate sqlite: read migration %d: %w", v, err)
		}
		bodies[v] = string(body)
	}
	before, after, err := d.up(ctx, versions, bodies)
	if err != nil {
		return fmt.Errorf("migrate sqlite: %w", err)
	}
	if after != before {
		d.logger.Info("sqlite schema migrated", "from", before, "to", after)
	}
	return nil
}

// up applies, in one transaction, the migrations past the version the
// transaction reads, and records the last. golang-migrate's Up marks the
// version dirty, runs a migration and clears the mark in three transactions,
// so a process killed between them (every command migrates) left a dirty
// schema that every process then refused; here a kill leaves the file at the
// version before. Down migrations and the version table stay golang-migrate's.
func (d *Driver) up(ctx context.Context, versions []uint, bodies map[uint]string) (before, after uint, err error) {
	tx, err := d.beginMigration(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = tx.Rollback() }() // after a commit, a no-op
	// Drover's version table, shaped as golang-migrate's; an earlier Drover's
	// (golang-migrate's default name, which an application's golang-migrate
	// in the same file uses too) is taken over under Drover's own name.
	var have, legacy bool
	if err := tx.QueryRowContext(ctx, queries.Get("MigrateTableExists")).Scan(&have, &legacy); err != nil {
		return 0, 0, fmt.Errorf("find the version table: %w", err)
	}
	if legacy {
		if _, err := tx.ExecContext(ctx, takeOverLegacyTable); err != nil {
			return 0, 0, fmt.Errorf("take over the version table %s as %s: %w", legacyVersionTable, versionTable, err)
		}
	}
	if _, err := tx.ExecContext(ctx, createVersionTable); err != nil {
		return 0, 0, fmt.Errorf("create the version table: %w", err)
	}
	var version int64
	var dirty bool
	switch err := tx.QueryRowContext(ctx, queries.Get("MigrateVersion")).Scan(&version, &dirty); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return 0, 0, versionReadError(err)
	case dirty:
		return 0, 0, &driver.SchemaDirtyError{Version: uint(max(version, 0)), Table: versionTable, Cause: migrate.ErrDirty{Version: int(version)}}
	}
	if version > 0 {
		before = uint(version)
	}
	if err := (driver.MigrationStatus{Current: before, Available: versions}).CheckNotAhead(); err != nil {
		return before, before, err
	}
	after = before
	for _, v := range versions {
		if v <= before {
			continue
		}
		if _, err := tx.ExecContext(ctx, bodies[v]); err != nil {
			return before, before, fmt.Errorf("migration %d: %w", v, err)
		}
		after = v
	}
	if after == before && !legacy {
		return before, after, nil // another migrator did it
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+versionTable); err != nil {
		return before, before, fmt.Errorf("record version %d: %w", after, err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+versionTable+" (version, dirty) VALUES (?, 0)", int64(after)); err != nil {
		return before, before, fmt.Errorf("record version %d: %w", after, err)
	}
	if err := tx.Commit(); err != nil {
		return before, before, fmt.Errorf("commit migrations %d to %d: %w", before+1, after, err)
	}
	return before, after, nil
}

// beginMigration begins the migrations' write transaction (IMMEDIATE), trying
// again while another writer holds the file past busy_timeout, for up to
// migrateWait: another process's migration, say, of a large table.
func (d *Driver) beginMigration(ctx context.Context) (*sql.Tx, error) {
	deadline := time.Now().Add(migrateWait)
	for {
		tx, err := d.write.BeginTx(ctx, nil)
		if err == nil {
			return tx, nil
		}
		if !isBusy(err) || time.Now().After(deadline) {
			return nil, fmt.Errorf("begin: %w", err)
		}
		d.logger.Info("sqlite migrate: another writer holds the file; waiting", "err", err)
		select { // BEGIN waited busy_timeout already; a pause in case it did not
		case <-ctx.Done():
			return nil, fmt.Errorf("begin: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// isBusy reports SQLite's "database is locked" (SQLITE_BUSY, also extended).
func isBusy(err error) bool {
	var se interface{ Code() int }
	return errors.As(err, &se) && se.Code()&0xff == 5
}

// versionTable holds Drover's schema version, apart from an application's own
// golang-migrate table in the same file, as pgdriver's does.
const versionTable = "drover_schema_migrations"

// versionReadError is err of reading versionTable's row, said as a table of
// another shape when it is one (a column missing, a value that is no number).
func versionReadError(err error) error {
	if msg := err.Error(); strings.Contains(msg, "no such column") || strings.Contains(msg, "Scan error") {
		return driver.VersionTableUnreadable(versionTable, err)
	}
	return fmt.Errorf("read the version: %w", err)
}

// legacyVersionTable held it before: golang-migrate's default name, which an
// application's golang-migrate uses too, so each read the other's version.
const legacyVersionTable = "schema_migrations"

// takeOverLegacyTable moves an earlier Drover's version table to Drover's own
// name, with an index of Drover's own name: golang-migrate names its index
// version_unique, and an application's golang-migrate creating its own by that
// name would skip it while ours had it.
const takeOverLegacyTable = `ALTER TABLE schema_migrations RENAME TO drover_schema_migrations;
DROP INDEX IF EXISTS version_unique;`

// createVersionTable creates versionTable, shaped as golang-migrate's.
const createVersionTable = `CREATE TABLE IF NOT EXISTS drover_schema_migrations (version uint64,dirty bool);
CREATE UNIQUE INDEX IF NOT EXISTS drover_schema_migrations_version_unique ON drover_schema_migrations (version);`

// MigrateStatus reports the applied version, whether a migration failed half-way,
// and the versions this build ships.
func (d *Driver) MigrateStatus(ctx context.Context) (driver.MigrationStatus, error) {
	st, _, err := d.status(ctx)
	return st, err
}

// status is MigrateStatus, and whether the version was read from an earlier
// Drover's legacyVersionTable (MigrateUp then takes it over).
func (d *Driver) status(ctx context.Context) (st driver.MigrationStatus, legacy bool, err error) {
	src, err := iofs.New(migrationFS, "migrations")
	if err != nil {
		return st, false, fmt.Errorf("migration status: %w", err)
	}
	defer src.Close()
	st.Available, err = available(src)
	if err != nil {
		return st, false, fmt.Errorf("migration status: %w", err)
	}
	var exists bool
	if err := d.read.QueryRowContext(ctx, queries.Get("MigrateTableExists")).Scan(&exists, &legacy); err != nil {
		return st, false, fmt.Errorf("migration status: %w", err)
	}
	q := "MigrateVersion"
	switch {
	case legacy:
		q = "MigrateLegacyVersion"
	case !exists:
		return st, false, nil
	}
	var version int64
	err = d.read.QueryRowContext(ctx, queries.Get(q)).Scan(&version, &st.Dirty)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return st, legacy, nil
	case err != nil:
		return st, legacy, fmt.Errorf("migration status: %w", versionReadError(err))
	}
	if version > 0 {
		st.Current = uint(version)
	}
	return st, legacy, nil
}

func (d *Driver) migrator() (*migrate.Migrate, source.Driver, error) {
	src, err := iofs.New(migrationFS, "migrations")
	if err != nil {
		return nil, nil, fmt.Errorf("migrate sqlite: %w", err)
	}
	db, err := migratesqlite.WithInstance(d.write, &migratesqlite.Config{MigrationsTable: versionTable})
	if err != nil {
		src.Close()
		return nil, nil, fmt.Errorf("migrate sqlite: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "sqlite", db)
	if err != nil {
		src.Close()
		return nil, nil, fmt.Errorf("migrate sqlite: %w", err)
	}
	m.Log = migrateLogger{d}
	return m, src, nil
}

// available lists the versions of the embedded migrations in order.
func available(src source.Driver) ([]uint, error) {
	var out []uint
	v, err := src.First()
	for err == nil {
		out = append(out, v)
		v, err = src.Next(v)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return out, nil
}

// migrateLogger routes golang-migrate's messages to the driver's logger.
type migrateLogger struct{ d *Driver }

func (l migrateLogger) Printf(format string, v ...any) {
	l.d.logger.Debug(fmt.Sprintf(format, v...), "component", "migrate")
}

func (l migrateLogger) Verbose() bool { return false }
