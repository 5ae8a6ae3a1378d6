-- Back to migration 009's trigger: the check leaves the table's definition (in
-- place, as 010 added it; the guard fails the migration unless it is gone) and
-- the trigger, verbatim, writes a claim's kept events out of the row again.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql,
    ',
    CONSTRAINT drover_jobs_claim_seq_live CHECK (claim_seq IS NULL OR status = ''running'' OR (status = ''succeeded'' AND finished_by IS NOT NULL))',
    '')
WHERE type = 'table' AND name = 'drover_jobs';
PRAGMA writable_schema = RESET;
CREATE TEMP TABLE drover_migration_010_down (
    removed INTEGER CONSTRAINT drover_jobs_claim_seq_live_removed CHECK (removed = 1)
);
INSERT INTO drover_migration_010_down
SELECT count(*) FROM sqlite_schema
WHERE type = 'table' AND name = 'drover_jobs' AND instr(sql, 'drover_jobs_claim_seq_live') = 0;
DROP TABLE drover_migration_010_down;

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
