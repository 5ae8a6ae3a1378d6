-- Queues exist implicitly through their jobs; drover_queues only records pauses.

-- name: QueueList
-- The counts migration 013 keeps (counts.go), and the queues with a pause
-- record and no jobs. Grouping the jobs instead read every job the retention
-- keeps on every GET /queues and every scrape of the drover_jobs gauge: 1.4 s
-- for 1M jobs in three queues (0.8 s as one scan).
SELECT c.queue, COALESCE(q.paused, 0), c.status, c.n
FROM drover_job_counts AS c LEFT JOIN drover_queues AS q ON q.name = c.queue
WHERE c.n <> 0
UNION ALL
SELECT q.name, q.paused, NULL, 0 FROM drover_queues AS q
WHERE NOT EXISTS (SELECT 1 FROM drover_job_counts AS c WHERE c.queue = q.name AND c.n <> 0)
ORDER BY 1, 3;

-- name: CountsOfTheJobs
-- The counts as the jobs are now, for CheckInvariants.
SELECT queue, status, COUNT(*) FROM drover_jobs GROUP BY queue, status;

-- name: CountsKept
SELECT queue, status, n FROM drover_job_counts WHERE n <> 0;

-- name: QueueSetPaused
INSERT INTO drover_queues (name, paused, updated_at) VALUES (:name, :paused, :now)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at;

-- name: QueueSetResumed
-- A resume changes a queue's record, if it has one, and creates none: a queue
-- never paused needs none, and the upsert made one for any name resumed (a
-- typo too), which /queues and /metrics then listed for good.
UPDATE drover_queues SET paused = :paused, updated_at = :now WHERE name = :name;

-- name: QueuesReady
-- The unpaused queues with a claimable job at :now, sorted. qs walks the queues
-- that hold queued jobs, each found by a probe of drover_jobs_claim_idx (its
-- key starts with the queue) past the last; for each, ps walks its first four
-- priorities the same way, and a priority's jobs are claimable when its range
-- up to run_at = :now is not empty; past the fourth priority, one range over
-- the rest, as ClaimCandidatesInQueue does past its sixteenth. The DISTINCT over
-- every queued job this replaced read the whole claim index once a second (a
-- backlog of 1M jobs, or 1M scheduled for later, is 1M entries); this reads a
-- few entries a queue (some 4 µs: 20k queues of one job take ~80 ms, where the
-- DISTINCT took ~10). A stalled job needs no case of its own (see
-- ClaimCandidatesInQueue).
WITH RECURSIVE qs(queue) AS (
    SELECT min(queue) FROM drover_jobs WHERE status IN ('queued', 'stalled')
    UNION ALL
    SELECT (SELECT min(queue) FROM drover_jobs
            WHERE status IN ('queued', 'stalled') AND queue > qs.queue)
    FROM qs WHERE qs.queue IS NOT NULL
)
SELECT qs.queue FROM qs
WHERE qs.queue IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM drover_queues AS q WHERE q.name = qs.queue AND q.paused = 1)
  AND EXISTS (
      WITH RECURSIVE ps(p, n) AS (
          SELECT min(priority), 1 FROM drover_jobs WHERE queue = qs.queue AND status IN ('queued', 'stalled')
          UNION ALL
          SELECT (SELECT min(priority) FROM drover_jobs
                  WHERE queue = qs.queue AND status IN ('queued', 'stalled') AND priority > ps.p), ps.n + 1
          FROM ps WHERE ps.p IS NOT NULL AND ps.n < 4
      )
      SELECT 1 FROM ps
      WHERE ps.p IS NOT NULL
        AND (EXISTS (SELECT 1 FROM drover_jobs AS j
                     WHERE j.queue = qs.queue AND j.priority = ps.p AND j.status IN ('queued', 'stalled')
                       AND j.run_at <= :now)
             OR ps.n = 4 AND EXISTS (SELECT 1 FROM drover_jobs AS j
                     WHERE j.queue = qs.queue AND j.priority > ps.p AND j.status IN ('queued', 'stalled')
                       AND j.run_at <= :now)))
ORDER BY qs.queue;
