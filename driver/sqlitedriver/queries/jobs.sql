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
-- idempotency_key, retry_of, workflow_run_id, workflow_node, enqueued_by); args
-- and metadata are JSON text bound as text, so they are stored as given. Rows
-- are inserted in the order of n, their place in the batch, so ids ascend with
-- it. enqueued_by is the actor of the job's enqueued event, which the row
-- itself records (migration 004; EventList reads it). A duplicate idempotency
-- key inserts nothing and returns no row; the caller then reads the existing
-- job. The conflict target repeats the partial index's WHERE; "WHERE true"
-- keeps ON CONFLICT from parsing as a join constraint. It answers the id and
-- key of each row it inserted; insertMany knows the rest (insertedJob).
WITH p(now) AS (VALUES (?)),
     b(n, kind, queue, status, args, metadata, priority, run_at, max_attempts, timeout_ms,
       idempotency_key, retry_of, workflow_run_id, workflow_node, enqueued_by) AS (VALUES /*rows*/)
INSERT INTO drover_jobs (
    kind, queue, status, args, metadata, priority, run_at, max_attempts, timeout_ms,
    idempotency_key, created_at, retry_of, workflow_run_id, workflow_node, enqueued_by
)
SELECT kind, queue, status, args, metadata, priority, run_at, max_attempts, timeout_ms,
       idempotency_key, (SELECT now FROM p), retry_of, workflow_run_id, workflow_node, enqueued_by
FROM b WHERE true ORDER BY n
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id, idempotency_key;

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
