package pgdriver

import (
	"errors"

	"github.com/golang-migrate/migrate/v4"
)

// Test hooks for the external test package (pgdriver_test).

// ClaimQueueSQL is the single-queue claim's statement.
func ClaimQueueSQL() string { return queries.Get("JobClaimQueue") }

// ClaimPlanSettings is the statement that sets up a single-queue claim's transaction.
const ClaimPlanSettings = claimPlanSettings

// CompleteManySQL is the batch completion's statement as the worker runs it.
func CompleteManySQL() string { return completeManyOrds }

// CompletePlanSettings is the statement that sets up a batch completion's transaction.
const CompletePlanSettings = completePlanSettings

// MigrateTo migrates up or down to version, for the migration tests.
func (d *Driver) MigrateTo(version uint) error {
	m, err := d.migrator()
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Migrate(version); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return err
	}
	return nil
}

// InsertSQL is the enqueue's statement: with its ON CONFLICT clause when keyed,
// and as it runs in a caller's transaction when inTx.
func InsertSQL(keyed, inTx bool) string { return insertQueries[b2i(keyed)][b2i(inTx)] }
