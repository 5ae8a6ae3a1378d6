DROP INDEX drover_jobs_lease_idx;
CREATE INDEX drover_jobs_lease_idx ON drover_jobs (lease_expires_at) WHERE status IN ('claimed','running');
