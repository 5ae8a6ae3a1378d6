package sqlitedriver

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/google/uuid"

	"github.com/drover-dev/drover/driver"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

const (
	// migrateLockLease bounds how long a migrator that died holding the lock
	// blocks the others. Generous: a slow migration must not lose the lock.
	migrateLockLease = 10 * time.Minute
	// migrateLockWait bounds how long MigrateUp waits for another migrator.
	migrateLockWait = 2 * time.Minute
	migrateLockPoll = 50 * time.Millisecond
)

// MigrateUp applies all pending migrations. It is safe to call concurrently from
// several goroutines or processes on the same file: a lock row serialises them
// and the later ones find nothing to do.
//
// A file already at this build's version is left alone without taking the
// lock: every command and every process start migrates, and a lock row left by
// a process killed while holding it (its lease is long, for slow migrations)
// held up every start behind it for minutes, where nothing was to be done.
func (d *Driver) MigrateUp(ctx context.Context) error {
	if st, err := d.MigrateStatus(ctx); err == nil && !st.Dirty && st.Current > 0 && st.Current == st.Latest() {
		return nil
	}
	release, err := d.migrateLock(ctx)
	if err != nil {
		return err
	}
	defer release()

	m, src, err := d.migrator()
	if err != nil {
		return err
	}
	// m.Close would close d.write through the database driver; close the source only.
	defer src.Close()
	before, dirty, err := m.Version()
	switch {
	case errors.Is(err, migrate.ErrNilVersion):
		before = 0
	case err != nil:
		return fmt.Errorf("migrate sqlite: %w", err)
	case dirty:
		return fmt.Errorf("migrate sqlite: %w", migrate.ErrDirty{Version: int(before)})
	}
	versions, err := available(src)
	if err != nil {
		return fmt.Errorf("migrate sqlite: %w", err)
	}
	if err := (driver.MigrationStatus{Current: before, Available: versions}).CheckNotAhead(); err != nil {
		return fmt.Errorf("migrate sqlite: %w", err)
	}
	after, err := d.up(ctx, src, before, versions)
	if after != before {
		d.logger.Info("sqlite schema migrated", "from", before, "to", after)
	}
	if err != nil {
		return fmt.Errorf("migrate sqlite: %w", err)
	}
	return nil
}

// up applies the migrations past the current version, each in one transaction
// with the version row that records it. golang-migrate's Up marks the version
// dirty, runs the migration and clears the mark in three transactions, so a
// process killed between them (every command migrates) left a dirty schema
// that every process then refused, with no way back but editing the file;
// here a kill leaves the file at the version before or after. Down
// migrations and the version table stay golang-migrate's. It returns the
// version the file is at.
func (d *Driver) up(ctx context.Context, src source.Driver, current uint, versions []uint) (uint, error) {
	for _, v := range versions {
		if v <= current {
			continue
		}
		r, _, err := src.ReadUp(v)
		if err != nil {
			return current, fmt.Errorf("read migration %d: %w", v, err)
		}
		body, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return current, fmt.Errorf("read migration %d: %w", v, err)
		}
		err = d.inTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return fmt.Errorf("migration %d: %w", v, err)
			}
			if _, err := tx.ExecContext(ctx, "DELETE FROM schema_migrations"); err != nil {
				return fmt.Errorf("migration %d: record the version: %w", v, err)
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, dirty) VALUES (?, 0)", int64(v)); err != nil {
				return fmt.Errorf("migration %d: record the version: %w", v, err)
			}
			return nil
		})
		if err != nil {
			return current, err
		}
		current = v
	}
	return current, nil
}

// MigrateStatus reports the applied version, whether a migration failed half-way,
// and the versions this build ships.
func (d *Driver) MigrateStatus(ctx context.Context) (driver.MigrationStatus, error) {
	var st driver.MigrationStatus
	src, err := iofs.New(migrationFS, "migrations")
	if err != nil {
		return st, fmt.Errorf("migration status: %w", err)
	}
	defer src.Close()
	st.Available, err = available(src)
	if err != nil {
		return st, fmt.Errorf("migration status: %w", err)
	}
	var exists bool
	if err := d.read.QueryRowContext(ctx, queries.Get("MigrateTableExists")).Scan(&exists); err != nil {
		return st, fmt.Errorf("migration status: %w", err)
	}
	if !exists {
		return st, nil
	}
	var version int64
	err = d.read.QueryRowContext(ctx, queries.Get("MigrateVersion")).Scan(&version, &st.Dirty)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("migration status: %w", err)
	}
	if version > 0 {
		st.Current = uint(version)
	}
	return st, nil
}

func (d *Driver) migrator() (*migrate.Migrate, source.Driver, error) {
	src, err := iofs.New(migrationFS, "migrations")
	if err != nil {
		return nil, nil, fmt.Errorf("migrate sqlite: %w", err)
	}
	db, err := migratesqlite.WithInstance(d.write, &migratesqlite.Config{})
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

// migrateLock takes the migration lease row, waiting for another holder to
// release it or for its lease to expire, and returns the release function.
func (d *Driver) migrateLock(ctx context.Context) (func(), error) {
	if _, err := d.write.ExecContext(ctx, queries.Get("MigrateLockCreate")); err != nil {
		return nil, fmt.Errorf("migrate sqlite: create lock table: %w", err)
	}
	holder := uuid.NewString()
	ctx, cancel := context.WithTimeout(ctx, migrateLockWait)
	defer cancel()
	tick := time.NewTicker(migrateLockPoll)
	defer tick.Stop()
	for {
		now := time.Now()
		var got string
		err := d.write.QueryRowContext(ctx, queries.Get("MigrateLockAcquire"),
			sql.Named("holder", holder),
			sql.Named("now", micros(now)),
			sql.Named("expires_at", micros(now.Add(migrateLockLease))),
		).Scan(&got)
		switch {
		case err == nil && got == holder:
			return func() {
				// The caller's ctx may be done; the release must still happen.
				rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if _, err := d.write.ExecContext(rctx, queries.Get("MigrateLockRelease"), sql.Named("holder", holder)); err != nil {
					d.logger.Warn("sqlite migrate lock not released; it expires on its own", "err", err)
				}
			}, nil
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("migrate sqlite: take lock: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("migrate sqlite: waiting for another migrator: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// migrateLogger routes golang-migrate's messages to the driver's logger.
type migrateLogger struct{ d *Driver }

func (l migrateLogger) Printf(format string, v ...any) {
	l.d.logger.Debug(fmt.Sprintf(format, v...), "component", "migrate")
}

func (l migrateLogger) Verbose() bool { return false }
