package pgdriver

import "github.com/jackc/pgx/v5/pgxpool"

// Test hooks for the external test package (pgdriver_test).

// ClaimsPool is the pool the single-queue claim runs on (claimPool).
func (d *Driver) ClaimsPool() *pgxpool.Pool { return d.claims }

// ClaimQueueSQL is the single-queue claim's statement.
func ClaimQueueSQL() string { return queries.Get("JobClaimQueue") }
