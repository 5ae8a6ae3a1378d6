-- Claiming. SQLite has one writer and claims run in BEGIN IMMEDIATE transactions,
-- so selecting candidates and then updating them cannot race another claimer.

-- name: ClaimCandidatesInQueue
-- Up to :limit claimable jobs of one queue, in claim order (priority, run_at,
-- id). One range over every priority, ORDER BY priority, run_at, id with
-- run_at <= :now, walks past every future job of a priority to reach the next:
-- a claim of an idle queue beside 200k jobs scheduled for later read all 200k
-- entries of drover_jobs_claim_idx (queue, priority, run_at, id) on every poll.
-- So the first 16 priorities that hold queued jobs are taken one at a time
-- (ps: each found by a probe of the index past the last), each a range that
-- ends at run_at = :now; CROSS JOIN keeps ps the outer loop, so the rows come in
-- claim order and the LIMIT stops the walk. Past the 16th priority, one range
-- over the rest, as before: a probe costs some ten entries' reading, and a
-- queue of thousands of priorities of one job each made a walk of them all ten
-- times the range's cost. Each arm answers at most :limit rows; the last sort
-- is over those.
-- A stalled job needs no case of its own: the reaper requeues it at now in the
-- transaction that stalls it, so none is ever committed, and its run_at is that
-- of a past claim anyway.
WITH RECURSIVE ps(p, n) AS (
    SELECT min(priority), 1 FROM drover_jobs WHERE queue = :queue AND status IN ('queued', 'stalled')
    UNION ALL
    SELECT (SELECT min(priority) FROM drover_jobs
            WHERE queue = :queue AND status IN ('queued', 'stalled') AND priority > ps.p), ps.n + 1
    FROM ps WHERE ps.p IS NOT NULL AND ps.n < 16
)
SELECT id, status, priority, run_at FROM (
    SELECT * FROM (
        SELECT j.id, j.status, j.priority, j.run_at
        FROM ps CROSS JOIN drover_jobs AS j
        WHERE ps.p IS NOT NULL
          AND j.queue = :queue AND j.priority = ps.p AND j.status IN ('queued', 'stalled') AND j.run_at <= :now
        LIMIT :limit)
    UNION ALL
    SELECT * FROM (
        SELECT j.id, j.status, j.priority, j.run_at FROM drover_jobs AS j
        WHERE j.queue = :queue AND j.status IN ('queued', 'stalled') AND j.run_at <= :now
          AND j.priority > (SELECT p FROM ps WHERE n = 16)
        ORDER BY j.priority, j.run_at, j.id
        LIMIT :limit)
)
WHERE NOT EXISTS (SELECT 1 FROM drover_queues AS q WHERE q.name = :queue AND q.paused = 1)
ORDER BY priority, run_at, id
LIMIT :limit;

-- name: ClaimCandidateByID
-- Queues do not filter a claim by id: the caller named the job.
SELECT id, status, priority, run_at FROM drover_jobs AS j
WHERE j.id = :id
  AND j.status IN ('queued', 'stalled')
  AND (j.status = 'stalled' OR j.run_at <= :now)
  AND NOT EXISTS (SELECT 1 FROM drover_queues AS q WHERE q.name = j.queue AND q.paused = 1);

-- name: ClaimJobs
-- Claims every candidate in one statement: p holds the call's values, c a row
-- per candidate (id, status it was selected in, new lease_token), all bound (see
-- rows.go). With start the row goes straight to running (attempt+1,
-- executions+1, started_at, rev+2): two transitions, whose two events the
-- caller appends (claimed at seq rev-1, started at seq rev), as pgdriver's
-- JobClaimQueue does. The status guard repeats the candidate's. A worker's
-- claim (keep: start and no request_id) of a queued job keeps those events in
-- the row, claim_seq their first seq (migration 009); every other claim sets
-- claim_seq NULL and its caller inserts the events (ClaimEvents).
-- It answers the columns the caller does not know: the status, owner, lease
-- token and expiry are what it set, and result and error are NULL in a claimed
-- or running row (the drover_jobs_*_only_when_* CHECKs); claimJobs fills them
-- in. Each column read costs the driver two calls into SQLite, each under the
-- connection's mutex: RETURNING * read 28 columns a job on the one writer.
-- OR FAIL: no statement journal (queries/lease.sql says why); claimJobs's
-- caller rolls the transaction back on any error.
WITH p(owner, lease_expires_at, start, now, keep) AS (VALUES (?, ?, ?, ?, ?)),
     c(id, status, token) AS (VALUES /*rows*/)
UPDATE OR FAIL drover_jobs
SET status = CASE WHEN p.start THEN 'running' ELSE 'claimed' END,
    attempt = attempt + 1,
    owner = p.owner,
    lease_token = c.token,
    lease_expires_at = p.lease_expires_at,
    executions = executions + CASE WHEN p.start THEN 1 ELSE 0 END,
    started_at = CASE WHEN p.start THEN p.now ELSE started_at END,
    rev = rev + CASE WHEN p.start THEN 2 ELSE 1 END,
    claim_seq = CASE WHEN p.keep AND c.status = 'queued' THEN rev + 1 END
FROM c, p
WHERE drover_jobs.id = c.id AND drover_jobs.status = c.status
RETURNING id, kind, queue, args, metadata, priority, run_at, attempt, executions, max_attempts, timeout_ms,
          idempotency_key, errors, created_at, started_at, finished_at, rev, retry_of, workflow_run_id, workflow_node;

-- name: ClaimEvents
-- The events of the jobs ClaimJobs claimed, read off their rows: c holds a row
-- per job (id, status it was claimed from, event type of that edge), p the
-- call's values. Each job logs its claim at seq rev; with start, at seq rev-1,
-- and the same row, its to_status 'running', also records the start that
-- follows at seq rev (see EventList), as pgdriver's claims do.
WITH p(start, at, actor, request_id) AS (VALUES (?, ?, ?, ?)),
     c(id, from_status, type) AS (VALUES /*rows*/)
INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
SELECT j.id, j.rev - p.start, c.type, c.from_status, CASE WHEN p.start THEN 'running' ELSE 'claimed' END,
       p.at, p.actor, p.request_id, j.attempt
FROM c JOIN drover_jobs AS j ON j.id = c.id JOIN p;

-- name: ClaimRequestSeen
-- Who made the claim of the request_id, if one was made, or closed it without
-- one (ClaimRequestClose).
SELECT actor FROM (
    SELECT actor FROM drover_job_events WHERE request_id = :request_id AND type = 'claimed'
    UNION ALL
    SELECT actor FROM drover_claim_requests WHERE request_id = :request_id
) LIMIT 1;

-- name: ClaimRequestClose
-- Closes the request_id, of which no claim was made, for actor: a claim of it
-- that runs later answers no jobs.
INSERT INTO drover_claim_requests (request_id, actor, closed_at) VALUES (:request_id, :actor, :now)
ON CONFLICT (request_id) DO NOTHING;

-- name: ClaimRequestsExpire
-- Closed request_ids older than a day go (a claim lives a long poll and a lease).
DELETE FROM drover_claim_requests WHERE closed_at < :before;

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
