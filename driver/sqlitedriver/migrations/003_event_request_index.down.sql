CREATE UNIQUE INDEX drover_job_events_request_idx ON drover_job_events (request_id, job_id) WHERE request_id IS NOT NULL;
DROP INDEX drover_job_events_claim_request_idx;
DROP INDEX drover_job_events_job_request_idx;
