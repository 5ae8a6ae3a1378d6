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

-- name: QueuesNextQueued
-- The first queue after :after that holds a queued job: a probe of
-- drover_jobs_claim_idx, whose key starts with the queue, past every entry of
-- :after. QueuesReady walks the queues so, then asks each for one claimable
-- job as a claim does: the DISTINCT over every queued job it replaced read the
-- whole claim index once a second (a backlog of 1M jobs, or 1M scheduled for
-- later, is 1M entries).
SELECT min(queue) FROM drover_jobs WHERE status IN ('queued', 'stalled') AND queue > :after;
