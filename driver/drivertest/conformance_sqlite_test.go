package drivertest_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/drivertest"
	"github.com/drover-dev/drover/driver/sqlitedriver"
)

// TestConformanceSQLite runs the suite against the SQLite driver, one file per test.
func TestConformanceSQLite(t *testing.T) {
	drivertest.Exercise(t, func(t *testing.T) driver.Driver {
		d, err := sqlitedriver.Open(filepath.Join(t.TempDir(), "drover.db"), sqlitedriver.Options{})
		if err != nil {
			t.Fatalf("sqlitedriver.Open: %v", err)
		}
		t.Cleanup(func() { d.Close() })
		if err := d.MigrateUp(context.Background()); err != nil {
			t.Fatalf("MigrateUp: %v", err)
		}
		return d
	})
}
