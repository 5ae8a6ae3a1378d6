-- The per-job transition log. seq is the job's rev after the transition.

-- name: EventInsert
INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
VALUES (:job_id, :seq, :type, :from_status, :to_status, :at, :actor, :request_id, :attempt);

-- name: EventRequestSeen
-- The attempt at which the job's log holds the request_id (unique per job), and
-- the type of the event that holds it, if it does.
SELECT attempt, type FROM drover_job_events WHERE request_id = :request_id AND job_id = :job_id;

-- name: EventList
-- Two events are kept in compact form, as in pgdriver (its JobEvents says why):
-- a claim that starts its jobs writes claimed and started as one row, type
-- 'claimed' with to_status 'running', the started event being seq + 1 from
-- claimed to running without a request_id; a job's enqueued event is its row's
-- enqueued_by (migration 004); and a succeeded event without a request_id is
-- its row's finished_by (migration 005); and a worker's claim, while it is
-- live, is its row's claim_seq (migration 009).
WITH s(d, type, from_status, to_status) AS (
    VALUES (0, 'claimed', 'queued', 'claimed'), (1, 'started', 'claimed', 'running'))
SELECT job_id, seq, type, COALESCE(from_status, ''),
       CASE WHEN type = 'claimed' THEN 'claimed' ELSE to_status END,
       at, actor, COALESCE(request_id, ''), attempt
FROM drover_job_events
WHERE job_id = :job_id
UNION ALL
SELECT job_id, seq + 1, 'started', 'claimed', 'running', at, actor, '', attempt
FROM drover_job_events
WHERE job_id = :job_id AND type = 'claimed' AND to_status = 'running'
UNION ALL
SELECT id, 1, 'enqueued', '', CASE WHEN workflow_run_id IS NULL THEN 'queued' ELSE 'pending' END,
       created_at, enqueued_by, '', 0
FROM drover_jobs
WHERE id = :job_id AND enqueued_by IS NOT NULL
UNION ALL
SELECT id, rev, 'succeeded', 'running', 'succeeded', finished_at, finished_by, '', attempt
FROM drover_jobs
WHERE id = :job_id AND finished_by IS NOT NULL
UNION ALL
-- The claimed and started events of a worker's claim while the row holds them
-- (migration 009 says when): at started_at, by the claim's worker.
SELECT id, claim_seq + s.d, s.type, s.from_status, s.to_status, started_at,
       CASE WHEN status = 'running' THEN 'worker:' || owner ELSE finished_by END, '', attempt
FROM drover_jobs CROSS JOIN s
WHERE id = :job_id AND claim_seq IS NOT NULL
  AND (status = 'running' OR (status = 'succeeded' AND finished_by IS NOT NULL))
ORDER BY 2;
