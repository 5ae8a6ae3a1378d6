-- A check in place of migration 009's trigger, as pgdriver's migration 013.
--
-- The trigger wrote a claim's kept events (claim_seq, 009) out of the row when
-- an update ended the claim. SQLite runs a row trigger's program, WHEN clause
-- included, for every row an UPDATE OF its columns writes, and every claim and
-- every completion writes status: with 100k jobs, claims of 1,000 and
-- completions of 500 (BenchmarkClaimCompleteBatches, six alternating runs of
-- each build) a job took 18.9 µs of the one writer with the trigger and 17.9
-- without (medians), though it fired for none of them.
--
-- Its two duties are split. Each of the driver's statements that ends a claim
-- (a completion with a request_id, a failure, a snooze, a cancel, a reap) writes
-- the claim's event row and clears claim_seq in its own transaction. The check
-- drover_jobs_claim_seq_live (claim_seq is NULL unless the row is running, or
-- succeeded with finished_by, the states in which readers unfold it) makes any
-- other update that would end a claim with its events still in the row fail
-- ("CHECK constraint failed: drover_jobs_claim_seq_live") instead of losing
-- them: an operator's own UPDATE, or a process older than this migration, whose
-- statements leave claim_seq to the trigger. An operator who must move a
-- running job by hand uses Drover's API, or clears claim_seq deliberately.
--
-- SQLite cannot add a constraint to a table, and a rebuild would copy every row
-- and drop what an operator built on it (migration 008 says more). The check is
-- added to the table's definition in place, the procedure SQLite documents for
-- changes that do not affect the on-disk content, once the guard below has
-- found that every row satisfies it (the trigger kept them so). DROP TRIGGER,
-- which follows, changes the schema cookie, so every other connection reloads
-- the schema. The guards fail the migration, and so roll it back, unless no row
-- breaks the check and the definition holds it exactly once.
CREATE TEMP TABLE drover_migration_010 (
    violations INTEGER CONSTRAINT drover_jobs_claim_seq_live_holds CHECK (violations = 0),
    added      INTEGER CONSTRAINT drover_jobs_claim_seq_live_added CHECK (added = 1)
);
INSERT INTO drover_migration_010 (violations, added)
SELECT count(*), 1 FROM drover_jobs
WHERE NOT (claim_seq IS NULL OR status = 'running' OR (status = 'succeeded' AND finished_by IS NOT NULL));

PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql,
    'CONSTRAINT drover_jobs_error_only_when_failed CHECK ((status = ''failed'') = (error IS NOT NULL))',
    'CONSTRAINT drover_jobs_error_only_when_failed CHECK ((status = ''failed'') = (error IS NOT NULL)),
    CONSTRAINT drover_jobs_claim_seq_live CHECK (claim_seq IS NULL OR status = ''running'' OR (status = ''succeeded'' AND finished_by IS NOT NULL))')
WHERE type = 'table' AND name = 'drover_jobs';
PRAGMA writable_schema = RESET;
UPDATE drover_migration_010 SET added = (
    SELECT count(*) FROM sqlite_schema
    WHERE type = 'table' AND name = 'drover_jobs'
      AND instr(sql, 'CONSTRAINT drover_jobs_claim_seq_live CHECK') > 0
      AND instr(substr(sql, instr(sql, 'CONSTRAINT drover_jobs_claim_seq_live CHECK') + 1), 'CONSTRAINT drover_jobs_claim_seq_live CHECK') = 0);
DROP TABLE drover_migration_010;

DROP TRIGGER drover_jobs_claim_event_out;
