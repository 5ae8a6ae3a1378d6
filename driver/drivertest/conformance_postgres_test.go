package drivertest_test

import (
	"testing"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/drivertest"
	"github.com/drover-dev/drover/internal/testdb"
)

// TestConformancePostgres runs the suite against the PostgreSQL driver, one schema
// per test. It skips when PostgreSQL is unreachable (fails under CI=true).
func TestConformancePostgres(t *testing.T) {
	drivertest.Exercise(t, func(t *testing.T) driver.Driver {
		return testdb.Open(t, "postgres")
	})
}
