-- Reads and inserts of drover_jobs. Times are unix microseconds (UTC).

-- name: JobGet
SELECT * FROM drover_jobs WHERE id = :id;

-- name: JobStatusOwner
-- What a transition needs to know of the row before it: cheaper than decoding it.
SELECT status, coalesce(owner, '') FROM drover_jobs WHERE id = :id;

-- name: JobGetByIdempotencyKey
SELECT * FROM drover_jobs WHERE idempotency_key = :idempotency_key;

-- name: JobInsertMany
-- p holds the call's time; b a row per job, bound (see rows.go): (n, kind,
-- queue, status, args, metadata, priority, run_at, max_attempts, timeout_ms,
-- idempotency_key, retry_of, workflow_run_id, workflow_node); args and metadata
-- are JSON text bound as text, so they are stored as given. Rows are inserted in
-- the order of n, their place in the batch, so ids ascend with it. A duplicate
-- idempotency key inserts nothing and returns no row; the caller then reads the
-- existing job. The conflict target repeats the partial index's WHERE; "WHERE
-- true" keeps ON CONFLICT from parsing as a join constraint.
WITH p(now) AS (VALUES (?)),
     b(n, kind, queue, status, args, metadata, priority, run_at, max_attempts, timeout_ms,
       idempotency_key, retry_of, workflow_run_id, workflow_node) AS (VALUES /*rows*/)
INSERT INTO drover_jobs (
    kind, queue, status, args, metadata, priority, run_at, max_attempts, timeout_ms,
    idempotency_key, created_at, retry_of, workflow_run_id, workflow_node
)
SELECT kind, queue, status, args, metadata, priority, run_at, max_attempts, timeout_ms,
       idempotency_key, (SELECT now FROM p), retry_of, workflow_run_id, workflow_node
FROM b WHERE true ORDER BY n
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING *;

-- name: InsertEvents
-- The enqueue events of new jobs, read off their rows: c holds a row per job
-- (id, event type, actor), p the time. Each logs seq rev, the row's first rev.
WITH p(at) AS (VALUES (?)),
     c(id, type, actor) AS (VALUES /*rows*/)
INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
SELECT j.id, j.rev, c.type, NULL, j.status, p.at, c.actor, NULL, j.attempt
FROM c JOIN drover_jobs AS j ON j.id = c.id JOIN p;

-- name: JobListDesc
SELECT * FROM drover_jobs
WHERE (json_array_length(:statuses) = 0 OR status IN (SELECT value FROM json_each(:statuses)))
  AND (:queue = '' OR queue = :queue)
  AND (:kind = '' OR kind = :kind)
  AND (:after_id = 0 OR id < :after_id)
ORDER BY id DESC
LIMIT :limit;

-- name: JobListAsc
SELECT * FROM drover_jobs
WHERE (json_array_length(:statuses) = 0 OR status IN (SELECT value FROM json_each(:statuses)))
  AND (:queue = '' OR queue = :queue)
  AND (:kind = '' OR kind = :kind)
  AND (:after_id = 0 OR id > :after_id)
ORDER BY id ASC
LIMIT :limit;
