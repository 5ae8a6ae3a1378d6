-- A failed job is requeued from the dead-letter queue at most once: a repeated
-- requeue (a retried request, a second click) answers the job the first one
-- created, found by its retry_of (JobDLQRequeue). Only requeued jobs have a
-- retry_of, so the index is small, and no transition changes the column, so
-- no update of a job row touches it. (SQLite's index entries end with the
-- rowid, id, so the look-up's ORDER BY id is the index's order.)
CREATE INDEX drover_jobs_retry_of_idx ON drover_jobs (retry_of) WHERE retry_of IS NOT NULL;
