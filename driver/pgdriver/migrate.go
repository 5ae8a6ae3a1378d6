package pgdriver

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/drover-dev/drover/driver"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationsTable keeps our version apart from an application's own golang-migrate table.
const migrationsTable = "drover_schema_migrations"

func (d *Driver) migrator() (*migrate.Migrate, error) {
	src, err := iofs.New(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDBFromPool(d.pool) // closing it leaves the pool open
	dbDriver, err := migratepgx.WithInstance(db, &migratepgx.Config{MigrationsTable: migrationsTable})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return migrate.NewWithInstance("iofs", src, "pgx5", dbDriver)
}

// MigrateUp implements driver.Driver. On one connection it holds the advisory
// lock golang-migrate takes for this table (so concurrent callers, older
// binaries among them, apply each migration once) and applies each migration
// in one transaction with the version row that records it. golang-migrate's
// Up marks the version dirty, runs the migration and clears the mark in three
// transactions: a process killed between them left a dirty schema that every
// later migration refused, with no command to clear it. The version table and
// down migrations stay golang-migrate's.
func (d *Driver) MigrateUp(ctx context.Context) error {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	defer c.Release()
	var dbName, schema string
	if err := c.QueryRow(ctx, "SELECT current_database(), current_schema()").Scan(&dbName, &schema); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	lockID, err := database.GenerateAdvisoryLockId(dbName, schema, migrationsTable)
	if err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	if _, err := c.Exec(ctx, "SELECT pg_advisory_lock($1::bigint)", lockID); err != nil {
		return fmt.Errorf("migrate up: take the migration lock: %w", err)
	}
	defer func() {
		// The caller's ctx may be done; the lock must still be let go (or the
		// connection closed, which lets it go too).
		uctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.Exec(uctx, "SELECT pg_advisory_unlock($1::bigint)", lockID); err != nil {
			_ = c.Conn().Close(uctx)
		}
	}()
	table := pgx.Identifier{schema, migrationsTable}.Sanitize()
	if _, err := c.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+table+" (version bigint not null primary key, dirty boolean not null)"); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	var v int64
	var dirty bool
	switch err := c.QueryRow(ctx, "SELECT version, dirty FROM "+table+" LIMIT 1").Scan(&v, &dirty); {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("migrate up: %w", versionReadError(table, err))
	case dirty: // -1: golang-migrate's no version
		return fmt.Errorf("migrate up: %w", &driver.SchemaDirtyError{Version: uint(max(v, 0)), Table: migrationsTable, Cause: migrate.ErrDirty{Version: int(v)}})
	}
	available := availableVersions(migrationFS)
	if err := (driver.MigrationStatus{Current: uint(max(v, 0)), Available: available}).CheckNotAhead(); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	for _, next := range available {
		if int64(next) <= v {
			continue
		}
		files, _ := fs.Glob(migrationFS, fmt.Sprintf("migrations/%03d_*.up.sql", next))
		if len(files) != 1 {
			return fmt.Errorf("migrate up: %d files for migration %d", len(files), next)
		}
		body, err := migrationFS.ReadFile(files[0])
		if err != nil {
			return fmt.Errorf("migrate up: %w", err)
		}
		for {
			err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", migrationLockTimeout.Milliseconds())); err != nil {
					return fmt.Errorf("migration %d: %w", next, err)
				}
				if _, err := tx.Exec(ctx, string(body)); err != nil {
					return fmt.Errorf("migration %d: %w", next, err)
				}
				if _, err := tx.Exec(ctx, "TRUNCATE "+table); err != nil {
					return fmt.Errorf("migration %d: record the version: %w", next, err)
				}
				if _, err := tx.Exec(ctx, "INSERT INTO "+table+" (version, dirty) VALUES ($1, false)", int64(next)); err != nil {
					return fmt.Errorf("migration %d: record the version: %w", next, err)
				}
				return nil
			})
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "55P03" { // lock_not_available
				break
			}
			d.log.Warn("migrate up: another transaction holds a lock the migration needs; letting the queue through and trying again",
				"migration", next, "retry_in", migrationLockPause, "err", err)
			select {
			case <-ctx.Done():
				return fmt.Errorf("migrate up: migration %d: waiting for a lock: %w", next, ctx.Err())
			case <-time.After(migrationLockPause):
			}
		}
		if err != nil {
			return fmt.Errorf("migrate up: %w", err)
		}
	}
	return nil
}

// A migration that changes a table (ALTER TABLE, CREATE INDEX) waits for the
// transactions that use it to end, and every later statement on the table
// queues behind that wait: behind one long transaction (a pg_dump, a report,
// a caller's EnqueueTx left open, a session of a lost host) the claims,
// heartbeats, completions and enqueues of a live queue stalled for as long as
// it lasted, and leases ran out meanwhile. A migration waits at most
// migrationLockTimeout for a lock, then rolls back (its lock wait with it, so
// the queue goes on), and is tried again after migrationLockPause, until the
// lock is free or ctx ends. It is the wait for a lock that is bounded, not
// the migration's work once it holds it (014's re-check of every row).
const (
	migrationLockTimeout = time.Second
	migrationLockPause   = 4 * time.Second
)

// MigrateStatus implements driver.Driver. It only reads the version table,
// without the migration lock: MigrateUp commits each migration with the row
// that records it, so the row always names the schema as it is. (Through
// golang-migrate it took the lock, and created the table when it was missing:
// while a migration ran, or waited for a table's lock behind a long
// transaction, it waited too, whatever its ctx, and so did every CLI command
// that opens the database, `drover migrate status` among them.)
func (d *Driver) MigrateStatus(ctx context.Context) (driver.MigrationStatus, error) {
	st := driver.MigrationStatus{Available: availableVersions(migrationFS)}
	table := pgx.Identifier{d.schema, migrationsTable}.Sanitize()
	var v int64
	var pgErr *pgconn.PgError
	switch err := d.pool.QueryRow(ctx, "SELECT version, dirty FROM "+table+" LIMIT 1").Scan(&v, &st.Dirty); {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table: never migrated
	case isNoRows(err):
	case err != nil:
		return st, fmt.Errorf("migration status: %w", versionReadError(table, err))
	}
	st.Current = uint(max(v, 0)) // golang-migrate writes -1 for none
	return st, nil
}

// versionReadError is err of reading the version table's row, said as a
// table of another shape when it is one (a column missing or of another type,
// a value that does not scan into a number).
func versionReadError(table string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42703" || pgErr.Code == "42804") || // undefined_column, datatype_mismatch
		!errors.As(err, &pgErr) && strings.Contains(err.Error(), "can't scan") {
		return driver.VersionTableUnreadable(table, err)
	}
	return err
}

func availableVersions(fsys fs.FS) []uint {
	files, _ := fs.Glob(fsys, "migrations/*.up.sql")
	var out []uint
	for _, f := range files {
		base := strings.TrimPrefix(f, "migrations/")
		if n, err := strconv.ParseUint(strings.SplitN(base, "_", 2)[0], 10, 32); err == nil {
			out = append(out, uint(n))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
