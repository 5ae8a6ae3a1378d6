ALTER TABLE drover_jobs SET (fillfactor = 80);
DROP INDEX drover_jobs_dlq_idx;
CREATE INDEX drover_jobs_dlq_idx ON drover_jobs (queue, id) WHERE status = 'failed';
CREATE INDEX drover_jobs_finished_idx ON drover_jobs (finished_at) WHERE status IN ('succeeded','failed','canceled','skipped');
CREATE INDEX drover_jobs_lease_idx ON drover_jobs (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX drover_jobs_claim_idx ON drover_jobs (queue, priority, run_at, id) WHERE status IN ('queued','stalled');
DROP TABLE drover_finished;
DROP TABLE drover_leases;
DROP TABLE drover_ready;
