-- A job's enqueued event is kept in its row, as pgdriver's migration 008 does
-- (see there): enqueued_by is its actor; seq 1, from nothing to the status it
-- was inserted in (pending for a workflow node, queued otherwise), at
-- created_at, attempt 0, no request_id. Jobs inserted before it keep their
-- drover_job_events row and a NULL enqueued_by. Never updated. A claim that
-- starts its jobs writes claimed and started as one row (type 'claimed',
-- to_status 'running'; see EventList) from the same version on. The down
-- migration unfolds both back into rows; drivers older than this migration read
-- neither form, so every process on this file must know migration 004.
ALTER TABLE drover_jobs ADD COLUMN enqueued_by TEXT;
