package pgdriver

// Test hooks for the external test package (pgdriver_test).

// ClaimQueueSQL is the single-queue claim's statement.
func ClaimQueueSQL() string { return queries.Get("JobClaimQueue") }

// ClaimPlanSettings is the statement that sets up a single-queue claim's transaction.
const ClaimPlanSettings = claimPlanSettings

// CompleteManySQL is the batch completion's statement as the worker runs it.
func CompleteManySQL() string { return completeManyOrds }
