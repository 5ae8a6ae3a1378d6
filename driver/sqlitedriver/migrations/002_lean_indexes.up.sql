-- Every version of a job row pays for every index on it, and a status change is
-- never a HOT update; keep only indexes that a hot path or the DLQ uses.
DROP INDEX IF EXISTS drover_job_events_at_idx;   -- unused: retention deletes events by job
DROP INDEX IF EXISTS drover_jobs_kind_idx;       -- listing by kind scans by id instead
DROP INDEX IF EXISTS drover_jobs_status_idx;     -- paid on every transition; lists scan by id
CREATE INDEX IF NOT EXISTS drover_jobs_dlq_idx ON drover_jobs (queue, id) WHERE status = 'failed';
