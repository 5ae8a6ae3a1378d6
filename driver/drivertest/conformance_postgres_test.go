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

// TestConformancePostgresUntypedParameters runs the suite on pools that send
// parameters without their types, as PgBouncer setups often configure pgx
// (default_query_exec_mode exec and simple_protocol): pgx then encodes each
// parameter from its Go value alone, as text, and in the simple protocol a
// statement's error arrives from Query instead of from its rows.
func TestConformancePostgresUntypedParameters(t *testing.T) {
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			drivertest.Exercise(t, func(t *testing.T) driver.Driver {
				return testdb.OpenURL(t, "postgres", testdb.PostgresURL(t)+"&default_query_exec_mode="+mode)
			})
		})
	}
}
