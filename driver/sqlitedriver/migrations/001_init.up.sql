-- Times are INTEGER microseconds since the Unix epoch (UTC); JSON is TEXT.
CREATE TABLE drover_jobs (
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
    CONSTRAINT drover_jobs_status_known CHECK (status IN ('pending','queued','claimed','running','waiting','paused','stalled','succeeded','failed','canceled','skipped')),
    CONSTRAINT drover_jobs_counts CHECK (priority >= 0 AND max_attempts >= 1 AND attempt >= 0 AND executions >= 0 AND executions <= attempt AND executions <= max_attempts AND timeout_ms >= 0),
    CONSTRAINT drover_jobs_lease_only_when_leased CHECK (
        (status IN ('claimed','running') AND owner IS NOT NULL AND lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)
        OR (status NOT IN ('claimed','running') AND owner IS NULL AND lease_token IS NULL AND lease_expires_at IS NULL)),
    CONSTRAINT drover_jobs_result_only_when_succeeded CHECK ((status = 'succeeded') = (result IS NOT NULL)),
    CONSTRAINT drover_jobs_error_only_when_failed CHECK ((status = 'failed') = (error IS NOT NULL))
);

CREATE INDEX drover_jobs_claim_idx ON drover_jobs (queue, priority, run_at, id) WHERE status IN ('queued','stalled');
CREATE INDEX drover_jobs_lease_idx ON drover_jobs (lease_expires_at) WHERE status IN ('claimed','running');
CREATE INDEX drover_jobs_finished_idx ON drover_jobs (finished_at) WHERE status IN ('succeeded','failed','canceled','skipped');
CREATE INDEX drover_jobs_status_idx ON drover_jobs (status, queue);
CREATE INDEX drover_jobs_kind_idx ON drover_jobs (kind);
CREATE UNIQUE INDEX drover_jobs_idempotency_key_idx ON drover_jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX drover_jobs_workflow_idx ON drover_jobs (workflow_run_id, workflow_node) WHERE workflow_run_id IS NOT NULL;

CREATE TABLE drover_job_events (
    job_id      INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    type        TEXT    NOT NULL,
    from_status TEXT,
    to_status   TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    actor       TEXT    NOT NULL,
    request_id  TEXT,
    attempt     INTEGER NOT NULL,
    PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX drover_job_events_request_idx ON drover_job_events (request_id, job_id) WHERE request_id IS NOT NULL;
CREATE INDEX drover_job_events_at_idx ON drover_job_events (at);

CREATE TABLE drover_queues (
    name       TEXT    PRIMARY KEY,
    paused     INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL
);

CREATE TABLE drover_leader (
    name       TEXT    PRIMARY KEY,
    leader_id  TEXT    NOT NULL,
    elected_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
