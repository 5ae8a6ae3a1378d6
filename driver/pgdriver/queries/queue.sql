-- name: QueueCounts
SELECT queue, status, count(*) FROM drover_jobs GROUP BY queue, status;

-- name: QueuePausedList
SELECT name, paused FROM drover_queues;

-- name: QueueSetPaused
INSERT INTO drover_queues (name, paused, updated_at) VALUES ($1, $2, now())
ON CONFLICT (name) DO UPDATE SET paused = EXCLUDED.paused, updated_at = EXCLUDED.updated_at;

-- name: QueuesReady
-- A skip scan over the claim index: one probe per queue that has queued jobs, then
-- one probe for a ready job in it, instead of reading every ready row (the
-- reconciler runs this every second, also under a backlog of millions). The
-- second probe starts at the entry the first found: the entries before it are
-- of jobs claimed since VACUUM last ran, thousands of index pages under load,
-- and are read once, not twice.
WITH RECURSIVE qs(queue, p, r, i) AS (
    (SELECT queue, priority, run_at, id FROM drover_jobs WHERE status IN ('queued','stalled')
     ORDER BY queue, priority, run_at, id LIMIT 1)
    UNION ALL
    SELECT n.queue, n.priority, n.run_at, n.id FROM qs CROSS JOIN LATERAL (
        SELECT j.queue, j.priority, j.run_at, j.id FROM drover_jobs j
        WHERE j.status IN ('queued','stalled') AND j.queue > qs.queue
        ORDER BY j.queue, j.priority, j.run_at, j.id LIMIT 1) n
)
SELECT qs.queue FROM qs
CROSS JOIN LATERAL (
    SELECT 1 FROM drover_jobs j
    WHERE j.status IN ('queued','stalled') AND j.queue = qs.queue
      AND (j.priority, j.run_at, j.id) >= (qs.p, qs.r, qs.i)
      AND j.run_at <= coalesce($1::timestamptz, now())
    ORDER BY j.priority, j.run_at, j.id
    LIMIT 1
) ready
WHERE qs.queue IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM drover_queues q WHERE q.name = qs.queue AND q.paused)
ORDER BY qs.queue;

-- name: WakeupPublish
SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q;

-- name: LeaderAttemptElect
-- Take the lease when there is none or it expired; extend it when we hold it.
INSERT INTO drover_leader (name, leader_id, elected_at, expires_at)
VALUES ('default', $1, coalesce($3::timestamptz, now()), coalesce($3::timestamptz, now()) + $2::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE SET
    leader_id = EXCLUDED.leader_id,
    elected_at = CASE WHEN drover_leader.leader_id = EXCLUDED.leader_id THEN drover_leader.elected_at ELSE EXCLUDED.elected_at END,
    expires_at = EXCLUDED.expires_at
WHERE drover_leader.leader_id = EXCLUDED.leader_id OR drover_leader.expires_at < EXCLUDED.elected_at
RETURNING leader_id;

-- name: LeaderResign
DELETE FROM drover_leader WHERE name = 'default' AND leader_id = $1;

-- name: LeaderGet
SELECT leader_id, expires_at FROM drover_leader WHERE name = 'default';
