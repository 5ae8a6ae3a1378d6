-- Retention and the dead-letter queue. Events have no foreign key to their job,
-- so every delete of jobs deletes their events explicitly.

-- name: FinishedBefore
SELECT id FROM drover_jobs
WHERE status IN ('succeeded', 'failed', 'canceled', 'skipped')
  AND finished_at < :before
ORDER BY finished_at, id
LIMIT :limit;

-- name: FailedJobs
-- The failed jobs (of :queue, when set; drover_jobs_dlq_idx), by id.
SELECT id FROM drover_jobs
WHERE status = 'failed' AND (:queue = '' OR queue = :queue)
ORDER BY id;

-- name: EventsDelete
DELETE FROM drover_job_events WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: JobsDelete
-- What it deleted, for the counts (counts.go).
DELETE FROM drover_jobs WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING queue, status;

-- name: JobDLQRetry
-- The job an earlier requeue of failed job :id created (drover_jobs_retry_of_idx).
SELECT * FROM drover_jobs WHERE retry_of = :id ORDER BY id LIMIT 1;
