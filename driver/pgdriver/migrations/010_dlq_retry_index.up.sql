-- A failed job is requeued from the dead-letter queue at most once: a repeated
-- requeue (a retried request, a second click) answers the job the first one
-- created, found by its retry_of (JobDLQRequeue). Only requeued jobs have a
-- retry_of, so the index is small, and no transition changes the column, so
-- the job row's updates stay HOT.
CREATE INDEX drover_jobs_retry_of_idx ON drover_jobs (retry_of) WHERE retry_of IS NOT NULL;
