DROP INDEX IF EXISTS drover_jobs_retry_of_idx;
