-- Back to one row per event: the succeeded events kept in job rows go back into
-- drover_job_events.
INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
SELECT id, rev, 'succeeded', 'running', 'succeeded', finished_at, finished_by, NULL, attempt
FROM drover_jobs WHERE finished_by IS NOT NULL;
ALTER TABLE drover_jobs DROP COLUMN finished_by;
