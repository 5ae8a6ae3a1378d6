-- Queues exist implicitly through their jobs; drover_queues only records pauses.

-- name: QueueList
WITH names AS (
    SELECT DISTINCT queue AS name FROM drover_jobs
    UNION
    SELECT name FROM drover_queues
)
SELECT n.name, COALESCE(q.paused, 0), j.status, COUNT(j.id)
FROM names AS n
LEFT JOIN drover_queues AS q ON q.name = n.name
LEFT JOIN drover_jobs AS j ON j.queue = n.name
GROUP BY n.name, j.status
ORDER BY n.name, j.status;

-- name: QueueSetPaused
INSERT INTO drover_queues (name, paused, updated_at) VALUES (:name, :paused, :now)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at;

-- name: QueuesReady
SELECT DISTINCT j.queue FROM drover_jobs AS j
WHERE j.status IN ('queued', 'stalled')
  AND (j.status = 'stalled' OR j.run_at <= :now)
  AND NOT EXISTS (SELECT 1 FROM drover_queues AS q WHERE q.name = j.queue AND q.paused = 1)
ORDER BY j.queue;
