-- A job's succeeded event, when its completion carries no request_id, is kept in
-- its row, as pgdriver's migration 009 does (see there): finished_by is its
-- actor; seq rev, from running to succeeded, at finished_at, at the row's
-- attempt, no request_id. A completion with a request_id still writes its
-- drover_job_events row. The down migration writes the kept events back as
-- rows; drivers older than this migration do not read them, so every process
-- on this file must know migration 005.
ALTER TABLE drover_jobs ADD COLUMN finished_by TEXT;
