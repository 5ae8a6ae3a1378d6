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
UPDATE drover_jobs
SET lease_expires_at = CASE WHEN :lease_us > 0 THEN :now + :lease_us ELSE lease_expires_at END,
    rev = rev + 1
WHERE id = :id AND status IN ('claimed', 'running') AND attempt = :attempt AND lease_token = :lease_token
RETURNING *;

-- name: JobComplete
UPDATE drover_jobs
SET status = 'succeeded',
    result = :result,
    finished_at = :now,
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
    owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    rev = rev + 1
WHERE id = :id AND status = 'running' AND attempt = :attempt AND lease_token = :lease_token
RETURNING *;

-- name: JobCancel
-- Guarded on the status read in the same transaction; terminal statuses never match.
UPDATE drover_jobs
SET status = 'canceled',
    finished_at = :now,
    owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    rev = rev + 1
WHERE id = :id AND status = :from_status
  AND status NOT IN ('succeeded', 'failed', 'canceled', 'skipped')
RETURNING *;
