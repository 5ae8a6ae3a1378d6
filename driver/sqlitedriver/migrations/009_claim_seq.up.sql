-- A worker's claim (one that starts its jobs, without a request_id, of a job
-- that was queued) logged one event row per job: claimed, to_status 'running',
-- which readers unfold into claimed and started (see EventList). Everything in
-- that row but its seq is in the job row while the claim lasts: at is
-- started_at (the claim sets both to the same instant), the actor is
-- 'worker:' || owner, the attempt is the row's, from_status is 'queued'. The
-- claim now keeps the seq in claim_seq instead of inserting the row, and every
-- claim sets claim_seq (NULL for a claim whose event it inserts), as pgdriver's
-- migration 012 does.
--
-- The row holds that event while its claim is live: the job is running under
-- it, or it succeeded under it with the event in the row (finished_by, 005),
-- when the actor is finished_by (the completion's actor is the same
-- 'worker:' || owner). Any other update that ends that state (a failure, a
-- retry, a snooze, a cancel, a reap, a completion with a request_id, or an
-- operator's own UPDATE) first needs the event written out, which this trigger
-- does from the row as it was, clearing claim_seq, so no statement can lose it. Readers of the log
-- (EventList, the chaos collector) add the event from rows in that state.
--
-- Drivers older than this migration do not read it: every process that uses
-- this database must run a version that knows migration 009.
ALTER TABLE drover_jobs ADD COLUMN claim_seq INTEGER;

CREATE TRIGGER drover_jobs_claim_event_out
AFTER UPDATE OF status, finished_by, claim_seq ON drover_jobs
FOR EACH ROW
WHEN OLD.claim_seq IS NOT NULL
     AND (OLD.status = 'running' OR (OLD.status = 'succeeded' AND OLD.finished_by IS NOT NULL))
     AND NOT (NEW.claim_seq IS OLD.claim_seq
              AND (NEW.status = 'running' OR (NEW.status = 'succeeded' AND NEW.finished_by IS NOT NULL)))
BEGIN
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    VALUES (OLD.id, OLD.claim_seq, 'claimed', 'queued', 'running', OLD.started_at,
            CASE WHEN OLD.status = 'running' THEN 'worker:' || OLD.owner ELSE OLD.finished_by END,
            NULL, OLD.attempt);
    -- Out of the row for good: a later update that made the row look live
    -- again without a claim (an operator's, or a process of an older version)
    -- could not write it twice or show it twice.
    UPDATE drover_jobs SET claim_seq = NULL WHERE id = OLD.id;
END;
