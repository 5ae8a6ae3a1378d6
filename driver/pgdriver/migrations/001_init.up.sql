CREATE TABLE drover_jobs (
    id               bigserial PRIMARY KEY,
    kind             text        NOT NULL,
    queue            text        NOT NULL,
    status           text        NOT NULL,
    args             jsonb       NOT NULL DEFAULT '{}',
    metadata         jsonb,
    priority         integer     NOT NULL DEFAULT 0,
    run_at           timestamptz NOT NULL,
    attempt          integer     NOT NULL DEFAULT 0,
    executions       integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL,
    timeout_ms       bigint      NOT NULL DEFAULT 0,
    idempotency_key  text,
    owner            text,
    lease_token      uuid,
    lease_expires_at timestamptz,
    result           jsonb,
    error            text,
    errors           jsonb       NOT NULL DEFAULT '[]',
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    rev              bigint      NOT NULL DEFAULT 1,
    retry_of         bigint,
    workflow_run_id  bigint,
    workflow_node    text,
    CONSTRAINT drover_jobs_status_known CHECK (status IN ('pending','queued','claimed','running','waiting','paused','stalled','succeeded','failed','canceled','skipped')),
    CONSTRAINT drover_jobs_counts CHECK (priority >= 0 AND max_attempts >= 1 AND attempt >= 0 AND executions >= 0 AND executions <= attempt AND executions <= max_attempts AND timeout_ms >= 0),
    -- Per-status invariants of the lifecycle, enforced by the database as a last line of defence.
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
    job_id      bigint      NOT NULL,
    seq         bigint      NOT NULL,
    type        text        NOT NULL,
    from_status text,
    to_status   text        NOT NULL,
    at          timestamptz NOT NULL,
    actor       text        NOT NULL,
    request_id  text,
    attempt     integer     NOT NULL,
    PRIMARY KEY (job_id, seq)
);
CREATE UNIQUE INDEX drover_job_events_request_idx ON drover_job_events (request_id, job_id) WHERE request_id IS NOT NULL;
CREATE INDEX drover_job_events_at_idx ON drover_job_events (at);

CREATE TABLE drover_queues (
    name       text        PRIMARY KEY,
    paused     boolean     NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE drover_leader (
    name       text        PRIMARY KEY,
    leader_id  text        NOT NULL,
    elected_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
