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

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
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

// MigrateUp implements driver.Driver. golang-migrate holds an advisory lock, so
// concurrent callers apply each migration once.
func (d *Driver) MigrateUp(ctx context.Context) error {
	m, err := d.migrator()
	if err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	defer m.Close()
	v, _, err := m.Version()
	if err != nil && !errors.Is(err, migrate.ErrNilVersion) {
		return fmt.Errorf("migrate up: %w", err)
	}
	if err := (driver.MigrationStatus{Current: v, Available: availableVersions(migrationFS)}).CheckNotAhead(); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// MigrateStatus implements driver.Driver.
func (d *Driver) MigrateStatus(ctx context.Context) (driver.MigrationStatus, error) {
	st := driver.MigrationStatus{Available: availableVersions(migrationFS)}
	m, err := d.migrator()
	if err != nil {
		return st, fmt.Errorf("migration status: %w", err)
	}
	defer m.Close()
	v, dirty, err := m.Version()
	if err != nil && !errors.Is(err, migrate.ErrNilVersion) {
		return st, fmt.Errorf("migration status: %w", err)
	}
	st.Current, st.Dirty = v, dirty
	return st, nil
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
