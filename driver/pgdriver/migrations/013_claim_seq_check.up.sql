-- Migration 012's trigger wrote a claim's kept events out of the row when an
-- update ended the claim. It was a BEFORE ROW trigger, so PostgreSQL locked
-- the old row version for it before its WHEN was evaluated, and the WHEN read
-- both versions of the row: every claim and every completion paid for it
-- (about 1.2 µs and 53 bytes of WAL a row, on rows its function never ran
-- for). Drover's own statements that end a claim now write its events out
-- themselves (JobComplete and JobCompleteMany with a request_id, JobFail,
-- JobSnooze, JobCancel, JobReapExpired), in the statement that ends it.
--
-- This check takes the trigger's other duty: an update no Drover statement
-- makes (an operator's own SQL) that would end a claim with its events still
-- in the row fails instead of losing them. A claim's events are in the row
-- only while the row is running under it, or succeeded under it with the
-- succeeded event in the row (finished_by, 009); in every other state
-- claim_seq is NULL. A statement that wants the row out of that state writes
-- the events out (see JobCancel) and clears claim_seq.
--
-- Every process that uses this database must run a version that knows this
-- migration: an older one's end of a claim relied on the trigger, and now
-- fails on this check (loudly: its job's lease then runs out and the reaper,
-- of a newer process, ends the claim properly).
DROP TRIGGER drover_jobs_claim_event_out ON drover_jobs;
DROP FUNCTION drover_jobs_claim_event_out();
ALTER TABLE drover_jobs ADD CONSTRAINT drover_jobs_claim_seq_live
    CHECK (claim_seq IS NULL OR status = 'running' OR (status = 'succeeded' AND finished_by IS NOT NULL));
