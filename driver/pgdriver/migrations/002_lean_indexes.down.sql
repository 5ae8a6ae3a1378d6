DROP INDEX IF EXISTS drover_jobs_dlq_idx;
CREATE INDEX IF NOT EXISTS drover_jobs_status_idx ON drover_jobs (status, queue);
CREATE INDEX IF NOT EXISTS drover_jobs_kind_idx ON drover_jobs (kind);
CREATE INDEX IF NOT EXISTS drover_job_events_at_idx ON drover_job_events (at);
