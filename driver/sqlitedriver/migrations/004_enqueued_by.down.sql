-- Back to one row per event, as drivers before this migration read the log: the
-- enqueued events kept in job rows, and the started event of each claim that
-- started its jobs (one row, to_status 'running'), go back into
-- drover_job_events.
INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
SELECT id, 1, 'enqueued', NULL, CASE WHEN workflow_run_id IS NULL THEN 'queued' ELSE 'pending' END,
       created_at, enqueued_by, NULL, 0
FROM drover_jobs WHERE enqueued_by IS NOT NULL;
INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
SELECT job_id, seq + 1, 'started', 'claimed', 'running', at, actor, NULL, attempt
FROM drover_job_events WHERE type = 'claimed' AND to_status = 'running';
UPDATE drover_job_events SET to_status = 'claimed' WHERE type = 'claimed' AND to_status = 'running';
ALTER TABLE drover_jobs DROP COLUMN enqueued_by;
