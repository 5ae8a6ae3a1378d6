package testdb

import (
	"context"
	"testing"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/driver/sqlitedriver"
)

// Kinds are the drivers every cross-driver test runs on.
var Kinds = []string{"postgres", "sqlite"}

// URL returns a fresh database for kind: a PostgreSQL URL with a private schema,
// or a SQLite file path.
func URL(t testing.TB, kind string) string {
	t.Helper()
	switch kind {
	case "postgres":
		return PostgresURL(t)
	case "sqlite":
		return SQLitePath(t)
	}
	t.Fatalf("unknown driver kind %q", kind)
	return ""
}

// OpenURL opens and migrates the database at url (as returned by URL), closing it at cleanup.
func OpenURL(t testing.TB, kind, url string) driver.Driver {
	t.Helper()
	ctx := context.Background()
	var d driver.Driver
	var err error
	if kind == "postgres" {
		d, err = pgdriver.New(ctx, url, pgdriver.Options{})
	} else {
		d, err = sqlitedriver.Open(url, sqlitedriver.Options{})
	}
	if err != nil {
		t.Fatalf("open %s: %v", kind, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatalf("migrate %s: %v", kind, err)
	}
	return d
}

// Open returns a fresh, migrated, empty driver of kind private to t.
func Open(t testing.TB, kind string) driver.Driver {
	t.Helper()
	return OpenURL(t, kind, URL(t, kind))
}
