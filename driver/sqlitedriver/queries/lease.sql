-- Lease-holder transitions. Each is one guarded UPDATE: the WHERE clause names the
-- status, attempt and lease_token the caller holds. That guard is the fence; a
-- stale caller matches no row and changes nothing.

-- name: JobStart
UPDATE drover_jobs
SET status = 'running',
    executions = executions + 1,
    started_at = :now,
    lease_expires_at = CASE WHEN :lease_us > 0 THEN :now + :lease_us ELSE lease_expires_at END,
    rev = rev + 1
WHERE id = :id AND status = 'claimed' AND attempt = :attempt AND lease_token = :lease_token
RETURNING *;

-- name: JobUnclaim
UPDATE drover_jobs
SET status = 'queued',
    owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    rev = rev + 1
WHERE id = :id AND status = 'claimed' AND attempt = :attempt AND lease_token = :lease_token
RETURNING *;

-- name: JobHeartbeat
-- A heartbeat never moves the lease's end earlier (see JobHeartbeat). A
-- running job with a timeout is never leased past started_at + timeout + one
-- lease: a worker that runs it on past its timeout keeps heartbeating in vain,
-- and the reaper ends the attempt (as pgdriver's).
UPDATE drover_jobs
SET lease_expires_at = CASE
        WHEN :lease_us <= 0 THEN lease_expires_at
        WHEN status = 'running' AND timeout_ms > 0
            THEN max(coalesce(lease_expires_at, 0), min(:now + :lease_us, started_at + timeout_ms * 1000 + :lease_us))
        ELSE max(coalesce(lease_expires_at, 0), :now + :lease_us) END,
    rev = rev + 1
WHERE id = :id AND status IN ('claimed', 'running') AND attempt = :attempt AND lease_token = :lease_token
RETURNING *;

-- name: JobComplete
-- Without a request_id the succeeded event is the row's finished_by (migration
-- 005) and the caller appends none.
--
-- A statement here that ends a worker's claim any other way (JobComplete with
-- a request_id, JobFail, JobSnooze, JobCancel, and the reaper's ReapStall)
-- clears claim_seq; its caller writes the claim's kept events out of the row in
-- the same transaction (keptClaim), and the check drover_jobs_claim_seq_live
-- (migration 010) refuses the update were claim_seq left behind.
UPDATE drover_jobs
SET status = 'succeeded',
    result = :result,
    finished_at = :now,
    finished_by = CASE WHEN :request_id = '' THEN 'worker:' || owner END,
    -- With a request_id the claim's kept events leave the row (the caller
    -- wrote them out: keptClaim).
    claim_seq = CASE WHEN :request_id = '' THEN claim_seq END,
    owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    rev = rev + 1
WHERE id = :id AND status = 'running' AND attempt = :attempt AND lease_token = :lease_token
RETURNING *;

-- name: JobFail
-- Retry while the execution budget lasts and the error is not permanent; else fail.
-- Every expression reads the row as it was before the update.
UPDATE drover_jobs
SET status = CASE WHEN NOT :permanent AND executions < max_attempts THEN 'queued' ELSE 'failed' END,
    run_at = CASE WHEN NOT :permanent AND executions < max_attempts THEN :retry_at ELSE run_at END,
    error = CASE WHEN NOT :permanent AND executions < max_attempts THEN NULL ELSE :error END,
    finished_at = CASE WHEN NOT :permanent AND executions < max_attempts THEN NULL ELSE :now END,
    errors = json_insert(errors, '$[#]', json(:error_entry)),
    claim_seq = NULL,
    owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    rev = rev + 1
WHERE id = :id AND status = 'running' AND attempt = :attempt AND lease_token = :lease_token
RETURNING *;

-- name: JobSnooze
UPDATE drover_jobs
SET status = 'queued',
    run_at = :run_at,
    executions = executions - 1,
    claim_seq = NULL,
    owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    rev = rev + 1
WHERE id = :id AND status = 'running' AND attempt = :attempt AND lease_token = :lease_token
RETURNING *;

-- name: JobCancel
-- Guarded on the status read in the same transaction; terminal statuses never match.
-- cancel_token keeps the lease token the cancel clears (migration 012), which
-- the canceled attempt's heartbeat is checked against.
UPDATE drover_jobs
SET status = 'canceled',
    finished_at = :now,
    claim_seq = NULL,
    cancel_token = lease_token,
    owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    rev = rev + 1
WHERE id = :id AND status = :from_status
  AND status NOT IN ('succeeded', 'failed', 'canceled', 'skipped')
RETURNING *;

-- Batched lease-holder transitions. Each statement takes one row per job,
-- (id, attempt, lease_token, at, arg, request_id), bound (see rows.go), naming
-- each job at most once; the event INSERTs also take p, the event type.
-- The event INSERT runs first and decides: it logs an event for every job whose
-- guard holds and whose request_id (if any) the job's log does not hold yet,
-- reading the row as it was (its owner for the actor, rev+1 for the seq). The
-- UPDATE then moves exactly the jobs that got that event (no event can have
-- seq = rev+1 before it), under the same guard. Jobs left out (lost lease,
-- unknown id, a replayed request_id) are diagnosed one at a time by the caller.
-- A completion without a request_id is the exception: its succeeded event is
-- the row's finished_by (migration 005), so the INSERT skips it and the UPDATE's
-- guard alone decides.
--
-- The UPDATEs are OR FAIL. A statement that writes many rows and may stop
-- halfway on a constraint (OR ABORT, the default) keeps a statement journal: a
-- copy of every page it is about to change, so that it can undo itself alone.
-- Past 64 KiB that copy goes to a temporary file, and a chunk of 256 jobs
-- changes far more: ~3% of the one writer's CPU in a burn-down went into
-- writing it. Every caller of these statements (and of ClaimJobs) rolls the
-- whole transaction back on any error, so undoing the statement alone buys
-- nothing; with OR FAIL a failure keeps the statement's earlier rows until that
-- rollback, and SQLite keeps no journal of the statement. The constraints are
-- checked just the same.

-- name: JobStartManyEvents
WITH p(type) AS (VALUES (?)),
     b(id, attempt, token, at, arg, request_id) AS (VALUES /*rows*/)
INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
SELECT j.id, j.rev + 1, (SELECT type FROM p), 'claimed', 'running', b.at, 'worker:' || j.owner, b.request_id, j.attempt
FROM b
JOIN drover_jobs AS j ON j.id = b.id
WHERE j.status = 'claimed' AND j.attempt = b.attempt AND j.lease_token = b.token
  AND NOT EXISTS (SELECT 1 FROM drover_job_events AS e WHERE e.request_id = b.request_id AND e.job_id = j.id);

-- name: JobStartMany
-- arg is the new lease length in microseconds; 0 keeps the current expiry.
WITH b(id, attempt, token, at, lease_us, request_id) AS (VALUES /*rows*/)
UPDATE OR FAIL drover_jobs
SET status = 'running',
    executions = executions + 1,
    started_at = b.at,
    lease_expires_at = CASE WHEN b.lease_us > 0 THEN b.at + b.lease_us ELSE lease_expires_at END,
    rev = rev + 1
FROM b
WHERE drover_jobs.id = b.id AND drover_jobs.status = 'claimed'
  AND drover_jobs.attempt = b.attempt AND drover_jobs.lease_token = b.token
  AND EXISTS (SELECT 1 FROM drover_job_events AS e WHERE e.job_id = drover_jobs.id AND e.seq = drover_jobs.rev + 1)
RETURNING *;

-- name: JobCompleteManyEvents
-- With a request_id the claim's events kept in the row (claim_seq, migration
-- 009) leave it too: the first SELECT writes them for exactly the jobs the
-- second gives a succeeded event (the same guard, and claim_seq set), which
-- JobCompleteMany then moves, clearing claim_seq. It comes first so that the
-- rows it writes (request_id NULL) are none that the second's NOT EXISTS could see.
WITH p(type) AS (VALUES (?)),
     b(id, attempt, token, at, arg, request_id) AS (VALUES /*rows*/)
INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
SELECT j.id, j.claim_seq, 'claimed', 'queued', 'running', j.started_at, 'worker:' || j.owner, NULL, j.attempt
FROM b
JOIN drover_jobs AS j ON j.id = b.id
WHERE j.status = 'running' AND j.attempt = b.attempt AND j.lease_token = b.token
  AND b.request_id IS NOT NULL AND j.claim_seq IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM drover_job_events AS e WHERE e.request_id = b.request_id AND e.job_id = j.id)
UNION ALL
SELECT j.id, j.rev + 1, (SELECT type FROM p), 'running', 'succeeded', b.at, 'worker:' || j.owner, b.request_id, j.attempt
FROM b
JOIN drover_jobs AS j ON j.id = b.id
WHERE j.status = 'running' AND j.attempt = b.attempt AND j.lease_token = b.token
  AND b.request_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM drover_job_events AS e WHERE e.request_id = b.request_id AND e.job_id = j.id);

-- name: JobCompleteMany
-- arg is the result: JSON text, bound as text so it is stored as given.
WITH b(id, attempt, token, at, result, request_id) AS (VALUES /*rows*/)
UPDATE OR FAIL drover_jobs
SET status = 'succeeded',
    result = b.result,
    finished_at = b.at,
    finished_by = CASE WHEN b.request_id IS NULL THEN 'worker:' || owner END,
    claim_seq = CASE WHEN b.request_id IS NULL THEN claim_seq END,
    owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    rev = rev + 1
FROM b
WHERE drover_jobs.id = b.id AND drover_jobs.status = 'running'
  AND drover_jobs.attempt = b.attempt AND drover_jobs.lease_token = b.token
  AND (b.request_id IS NULL
       OR EXISTS (SELECT 1 FROM drover_job_events AS e WHERE e.job_id = drover_jobs.id AND e.seq = drover_jobs.rev + 1))
RETURNING *;

-- name: ClaimKept
-- The claim event a running job's row holds (claim_seq, migration 009), read
-- before a statement that ends the claim; its caller writes it out as a row
-- (keptClaim).
SELECT claim_seq, started_at, 'worker:' || owner, attempt FROM drover_jobs
WHERE id = :id AND status = 'running' AND claim_seq IS NOT NULL;

-- name: JobCanceledHolder
-- Whether the job was canceled during attempt :attempt while lease token
-- :lease_token held it (migration 012): that token's heartbeat answers
-- cancel requested, any other lease lost.
SELECT count(*) FROM drover_jobs
WHERE id = :id AND status = 'canceled' AND attempt = :attempt AND cancel_token = :lease_token;
