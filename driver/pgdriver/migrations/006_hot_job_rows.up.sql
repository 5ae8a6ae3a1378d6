-- The claim and the completion change a job's status, lease and finish time, and
-- each index on those columns (the claim index's status predicate, the lease
-- index, the finished index, the DLQ index's status predicate) made every one of
-- those updates a non-HOT update: a new entry in every index of the job row for
-- each transition. The sets those indexes found now live beside the job row,
-- each written by the statement of the transition that changes it, and no column
-- a hot transition changes is indexed on drover_jobs, so its updates stay on the
-- page (HOT) and touch no index.
--
-- Older Drover binaries do not write these tables: every process that uses this
-- database must run a version that knows migration 006.

-- The claimable set: one row per job in queued (or stalled), keyed in claim order.
-- A claim deletes the rows it takes and claims their jobs under the same
-- statement; a row whose job is no longer claimable (a claim that rolled back
-- after a concurrent cancel skipped the row) is deleted by the next claim that
-- reaches it, and its job is left alone.
CREATE TABLE drover_ready (
    queue    text        NOT NULL,
    priority integer     NOT NULL,
    run_at   timestamptz NOT NULL,
    id       bigint      NOT NULL,
    PRIMARY KEY (queue, priority, run_at, id)
);
INSERT INTO drover_ready (queue, priority, run_at, id)
SELECT queue, priority, run_at, id FROM drover_jobs WHERE status IN ('queued','stalled');

-- Where the lease reaper looks: one row per claim (a batch of jobs), whose
-- expires_at is at most the lease expiry of each of its jobs that is still
-- leased. A lease is only ever set by a claim, which writes its row; a start or
-- a heartbeat that moves a lease earlier writes one for its job. The reaper
-- reads the rows that are due, reaps their expired jobs, and then deletes the
-- rows none of whose jobs is leased, or moves them to their earliest live lease.
CREATE TABLE drover_leases (
    id         bigserial   PRIMARY KEY,
    expires_at timestamptz NOT NULL,
    job_ids    bigint[]    NOT NULL
);
CREATE INDEX drover_leases_expires_idx ON drover_leases (expires_at);
INSERT INTO drover_leases (expires_at, job_ids)
SELECT lease_expires_at, array_agg(id ORDER BY id) FROM drover_jobs
WHERE status IN ('claimed','running') GROUP BY lease_expires_at;

-- Where retention looks: one row per statement that finished jobs, with their
-- common finished_at. Retention deletes the jobs of the rows past the retention
-- age, then the rows whose jobs are all gone.
CREATE TABLE drover_finished (
    id          bigserial   PRIMARY KEY,
    finished_at timestamptz NOT NULL,
    job_ids     bigint[]    NOT NULL
);
CREATE INDEX drover_finished_at_idx ON drover_finished (finished_at);
INSERT INTO drover_finished (finished_at, job_ids)
SELECT finished_at, array_agg(id ORDER BY id) FROM drover_jobs
WHERE status IN ('succeeded','failed','canceled','skipped') AND finished_at IS NOT NULL
GROUP BY finished_at;

DROP INDEX drover_jobs_claim_idx;
DROP INDEX drover_jobs_lease_idx;
DROP INDEX drover_jobs_finished_idx;
-- The DLQ is the failed jobs. error is set exactly when a job is failed
-- (drover_jobs_error_only_when_failed) and stays NULL through the hot
-- transitions, so this predicate, unlike status = 'failed', keeps them HOT.
DROP INDEX drover_jobs_dlq_idx;
CREATE INDEX drover_jobs_dlq_idx ON drover_jobs (queue, id) WHERE error IS NOT NULL;

-- A job row is written three times; a HOT update needs room on the row's own
-- page. At 80, a third of updates were HOT in a burn-down; at 40, 99.6%.
ALTER TABLE drover_jobs SET (fillfactor = 40);
