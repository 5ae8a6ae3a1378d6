-- Back to migration 007's constraints and finished index: the table is rebuilt
-- again with the list forms (see 008_row_checks.up.sql).
CREATE TABLE drover_jobs_new (
    id               INTEGER PRIMARY KEY AUTOINCREMENT, -- AUTOINCREMENT: ids are never reused after deletes
    kind             TEXT    NOT NULL,
    queue            TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    args             TEXT    NOT NULL DEFAULT '{}',
    metadata         TEXT,
    priority         INTEGER NOT NULL DEFAULT 0,
    run_at           INTEGER NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    executions       INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    timeout_ms       INTEGER NOT NULL DEFAULT 0,
    idempotency_key  TEXT,
    owner            TEXT,
    lease_token      TEXT,
    lease_expires_at INTEGER,
    result           TEXT,
    error            TEXT,
    errors           TEXT    NOT NULL DEFAULT '[]',
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    finished_at      INTEGER,
    rev              INTEGER NOT NULL DEFAULT 1,
    retry_of         INTEGER,
    workflow_run_id  INTEGER,
    workflow_node    TEXT,
    enqueued_by      TEXT,
    finished_by      TEXT,
    CONSTRAINT drover_jobs_status_known CHECK (status IN ('pending','queued','claimed','running','waiting','paused','stalled','succeeded','failed','canceled','skipped')),
    CONSTRAINT drover_jobs_counts CHECK (priority >= 0 AND max_attempts >= 1 AND attempt >= 0 AND executions >= 0 AND executions <= attempt AND executions <= max_attempts AND timeout_ms >= 0),
    CONSTRAINT drover_jobs_lease_only_when_leased CHECK (
        (status IN ('claimed','running') AND owner IS NOT NULL AND lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)
        OR (status NOT IN ('claimed','running') AND owner IS NULL AND lease_token IS NULL AND lease_expires_at IS NULL)),
    CONSTRAINT drover_jobs_result_only_when_succeeded CHECK ((status = 'succeeded') = (result IS NOT NULL)),
    CONSTRAINT drover_jobs_error_only_when_failed CHECK ((status = 'failed') = (error IS NOT NULL))
);

INSERT INTO drover_jobs_new (id, kind, queue, status, args, metadata, priority, run_at, attempt, executions,
    max_attempts, timeout_ms, idempotency_key, owner, lease_token, lease_expires_at, result, error, errors,
    created_at, started_at, finished_at, rev, retry_of, workflow_run_id, workflow_node, enqueued_by, finished_by)
SELECT id, kind, queue, status, args, metadata, priority, run_at, attempt, executions,
    max_attempts, timeout_ms, idempotency_key, owner, lease_token, lease_expires_at, result, error, errors,
    created_at, started_at, finished_at, rev, retry_of, workflow_run_id, workflow_node, enqueued_by, finished_by
FROM drover_jobs ORDER BY id;

-- The copy's counter is its largest id; the old table's may be past it (its
-- last jobs deleted). The rename below carries the row to the new name.
DELETE FROM sqlite_sequence WHERE name = 'drover_jobs_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'drover_jobs_new', seq FROM sqlite_sequence WHERE name = 'drover_jobs';

DROP TABLE drover_jobs;
ALTER TABLE drover_jobs_new RENAME TO drover_jobs;

CREATE INDEX drover_jobs_claim_idx ON drover_jobs (queue, priority, run_at, id) WHERE status IN ('queued','stalled');
CREATE INDEX drover_jobs_lease_idx ON drover_jobs (lease_expires_at) WHERE status IN ('claimed','running');
CREATE INDEX drover_jobs_finished_idx ON drover_jobs (finished_at) WHERE status IN ('succeeded','failed','canceled','skipped');
CREATE UNIQUE INDEX drover_jobs_idempotency_key_idx ON drover_jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX drover_jobs_workflow_idx ON drover_jobs (workflow_run_id, workflow_node) WHERE workflow_run_id IS NOT NULL;
CREATE INDEX drover_jobs_dlq_idx ON drover_jobs (queue, id) WHERE status = 'failed';
CREATE INDEX drover_jobs_retry_of_idx ON drover_jobs (retry_of) WHERE retry_of IS NOT NULL;
