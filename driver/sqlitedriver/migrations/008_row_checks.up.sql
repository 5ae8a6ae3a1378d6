-- The job row's status CHECK and finished index without lists of three or more
-- constants.
--
-- SQLite evaluates every CHECK that names a written column, and the WHERE of
-- every partial index over one, for each row an INSERT or UPDATE writes. In those
-- expressions `x IN (a, b, c, ...)` is coded as a temporary b-tree of the
-- constants, built anew at every evaluation: the once-per-statement guard that
-- builds it once elsewhere is not used for an expression that reads the row being
-- written. Two such lists were on every claim and completion: the
-- drover_jobs_status_known CHECK (eleven statuses) and drover_jobs_finished_idx's
-- WHERE (four terminal statuses). With 100k jobs, claims of 1,000 and
-- completions of 500, they took ~5 of the ~22 µs of the one writer a job. A list
-- of two constants is coded as two comparisons, so the other predicates stay.
--
-- drover_jobs_status_known becomes a chain of comparisons that admits the same
-- statuses, hot ones first. SQLite cannot alter a constraint, and a rebuild of
-- the table would copy every row and drop what an operator built on it (views,
-- indexes, triggers). Since the new CHECK admits exactly what the old one did,
-- every row already satisfies it and nothing on disk changes: the table's
-- definition is edited in place, the procedure SQLite documents for changes that
-- do not affect the on-disk content ("Making Other Kinds Of Table Schema
-- Changes"). writable_schema = RESET reloads this connection's schema; the index
-- statements below change the schema cookie, so every other connection reloads
-- it too. The guard fails the migration, and so rolls it back, unless the
-- definition now holds the new CHECK and not the old one (say, a definition
-- someone changed by hand).
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql,
    'CHECK (status IN (''pending'',''queued'',''claimed'',''running'',''waiting'',''paused'',''stalled'',''succeeded'',''failed'',''canceled'',''skipped''))',
    'CHECK (status = ''queued'' OR status = ''running'' OR status = ''succeeded'' OR status = ''claimed'' OR status = ''failed'' OR status = ''stalled'' OR status = ''canceled'' OR status = ''pending'' OR status = ''waiting'' OR status = ''paused'' OR status = ''skipped'')')
WHERE type = 'table' AND name = 'drover_jobs';
PRAGMA writable_schema = RESET;
CREATE TEMP TABLE drover_migration_008 (
    rewritten INTEGER CONSTRAINT drover_jobs_status_known_rewritten CHECK (rewritten = 1)
);
INSERT INTO drover_migration_008
SELECT count(*) FROM sqlite_schema
WHERE type = 'table' AND name = 'drover_jobs'
  AND instr(sql, 'CHECK (status = ''queued'' OR status = ''running'' OR status = ''succeeded'' OR status = ''claimed'' OR status = ''failed'' OR status = ''stalled'' OR status = ''canceled'' OR status = ''pending'' OR status = ''waiting'' OR status = ''paused'' OR status = ''skipped'')') > 0
  AND instr(sql, 'status IN (''pending''') = 0;
DROP TABLE drover_migration_008;

-- drover_jobs_finished_idx keys the rows whose finished_at is set. Only a move
-- to a terminal status sets it (complete, a final fail, cancel, the reaper's
-- fail) and a retry clears it; FinishedBefore still filters on the status, and
-- its `finished_at < :before` is what lets SQLite use the index.
DROP INDEX drover_jobs_finished_idx;
CREATE INDEX drover_jobs_finished_idx ON drover_jobs (finished_at) WHERE finished_at IS NOT NULL;
