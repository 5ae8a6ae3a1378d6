-- The lease reaper: expired leases go to stalled and on, in one transaction, to
-- queued (requeued) or failed (the running attempt used up the budget).

-- name: ReapCandidates
-- :skip is a JSON array of the ids the call's reap was refused for, which it
-- reads past to the next expired leases.
SELECT * FROM drover_jobs
WHERE status IN ('claimed', 'running') AND lease_expires_at < :now
  AND id NOT IN (SELECT value FROM json_each(:skip))
ORDER BY lease_expires_at, id
LIMIT :limit;

-- name: ReapStall
UPDATE drover_jobs
SET status = 'stalled',
    claim_seq = NULL,
    owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    errors = CASE WHEN :error_entry IS NULL THEN errors ELSE json_insert(errors, '$[#]', json(:error_entry)) END,
    rev = rev + 1
WHERE id = :id AND status = :from_status AND attempt = :attempt AND lease_token = :lease_token
  AND lease_expires_at < :now
RETURNING *;

-- name: ReapRequeue
UPDATE drover_jobs
SET status = 'queued', run_at = :now, rev = rev + 1
WHERE id = :id AND status = 'stalled'
RETURNING *;

-- name: ReapFail
UPDATE drover_jobs
SET status = 'failed', error = :error, finished_at = :now, rev = rev + 1
WHERE id = :id AND status = 'stalled'
RETURNING *;
