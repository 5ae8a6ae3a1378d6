-- The lease index was partial on status IN ('claimed','running'), so every
-- statement that checks status = 'running' could read it, and the planner did
-- whenever the statistics said that few jobs were leased: after an ANALYZE while
-- the queue was idle, a batch completion of 500 jobs walked every leased job's
-- index entry once per input row (500 leased jobs: 98 ms instead of ~8; 1,500:
-- 255 ms; auto_explain). The same rows, keyed the same way, under a predicate
-- that only the reaper's "lease_expires_at < now" implies: a lease is set
-- exactly when a job is claimed or running (drover_jobs_lease_only_when_leased).
DROP INDEX drover_jobs_lease_idx;
CREATE INDEX drover_jobs_lease_idx ON drover_jobs (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
