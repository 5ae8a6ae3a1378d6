-- Back to migration 007's status CHECK and finished index (see 008_row_checks.up.sql).
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql,
    'CHECK (status = ''queued'' OR status = ''running'' OR status = ''succeeded'' OR status = ''claimed'' OR status = ''failed'' OR status = ''stalled'' OR status = ''canceled'' OR status = ''pending'' OR status = ''waiting'' OR status = ''paused'' OR status = ''skipped'')',
    'CHECK (status IN (''pending'',''queued'',''claimed'',''running'',''waiting'',''paused'',''stalled'',''succeeded'',''failed'',''canceled'',''skipped''))')
WHERE type = 'table' AND name = 'drover_jobs';
PRAGMA writable_schema = RESET;
CREATE TEMP TABLE drover_migration_008 (
    restored INTEGER CONSTRAINT drover_jobs_status_known_restored CHECK (restored = 1)
);
INSERT INTO drover_migration_008
SELECT count(*) FROM sqlite_schema
WHERE type = 'table' AND name = 'drover_jobs'
  AND instr(sql, 'CHECK (status IN (''pending'',''queued'',''claimed'',''running'',''waiting'',''paused'',''stalled'',''succeeded'',''failed'',''canceled'',''skipped''))') > 0;
DROP TABLE drover_migration_008;

DROP INDEX drover_jobs_finished_idx;
CREATE INDEX drover_jobs_finished_idx ON drover_jobs (finished_at) WHERE status IN ('succeeded','failed','canceled','skipped');
