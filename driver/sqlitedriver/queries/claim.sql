-- Claiming. SQLite has one writer and claims run in BEGIN IMMEDIATE transactions,
-- so selecting candidates and then updating them cannot race another claimer.

-- name: ClaimCandidatesInQueue
-- One queue at a time: queue = ? lets SQLite walk drover_jobs_claim_idx
-- (queue, priority, run_at, id) in claim order and stop at the limit, where an
-- IN list over several queues would scan and sort every waiting job. JobClaim
-- merges the queues' candidates.
SELECT id, status, priority, run_at FROM drover_jobs AS j
WHERE j.queue = :queue
  AND j.status IN ('queued', 'stalled')
  AND (j.status = 'stalled' OR j.run_at <= :now)
  AND NOT EXISTS (SELECT 1 FROM drover_queues AS q WHERE q.name = j.queue AND q.paused = 1)
ORDER BY j.priority, j.run_at, j.id
LIMIT :limit;

-- name: ClaimCandidateByID
-- Queues do not filter a claim by id: the caller named the job.
SELECT id, status, priority, run_at FROM drover_jobs AS j
WHERE j.id = :id
  AND j.status IN ('queued', 'stalled')
  AND (j.status = 'stalled' OR j.run_at <= :now)
  AND NOT EXISTS (SELECT 1 FROM drover_queues AS q WHERE q.name = j.queue AND q.paused = 1);

-- name: ClaimJob
UPDATE drover_jobs
SET status = 'claimed',
    attempt = attempt + 1,
    owner = :owner,
    lease_token = :lease_token,
    lease_expires_at = :lease_expires_at,
    rev = rev + 1
WHERE id = :id AND status = :from_status
RETURNING *;

-- name: ClaimRequestSeen
SELECT EXISTS (SELECT 1 FROM drover_job_events WHERE request_id = :request_id AND type = 'claimed');

-- name: ClaimReplay
-- The jobs a repeated claim request took the first time, if that claim's lease is
-- still the one Owner holds.
SELECT j.* FROM drover_job_events AS e
JOIN drover_jobs AS j ON j.id = e.job_id
WHERE e.request_id = :request_id
  AND e.type = 'claimed'
  AND j.owner = :owner
  AND j.attempt = e.attempt
  AND j.status IN ('claimed', 'running')
ORDER BY j.priority, j.run_at, j.id;
