-- name: QueueCounts
-- The jobs by queue and status (migration 017): the counts folded so far plus
-- the changes not yet folded, in one snapshot, so a fold between them is seen
-- whole or not at all. Reads a row per queue and status, and the changes of
-- the last fold interval, whatever the number of jobs.
SELECT queue, status, sum(n)::bigint FROM (
    SELECT queue, status, n FROM drover_job_counts
    UNION ALL
    SELECT queue, status, n FROM drover_job_count_changes
) c GROUP BY queue, status HAVING sum(n) <> 0;

-- name: JobCountsFold
-- Moves the changes into the counts: deleted and added in one statement, so a
-- change is counted once, before or after, in every snapshot. Two folds at once
-- each take the changes the other has not deleted (the second waits for the
-- first's locks, then skips the rows it deleted), and add in (queue, status)
-- order, so they never wait for each other in a cycle.
WITH moved AS (
    DELETE FROM drover_job_count_changes RETURNING queue, status, n
)
INSERT INTO drover_job_counts (queue, status, n)
SELECT queue, status, sum(n) FROM moved GROUP BY queue, status ORDER BY queue, status
ON CONFLICT (queue, status) DO UPDATE SET n = drover_job_counts.n + EXCLUDED.n;

-- name: QueuePausedList
SELECT name, paused FROM drover_queues;

-- name: QueuePauseLock
-- Before a pause's write, in its transaction: waits for the claims of queue $2
-- under way, which hold its lock shared (ClaimLockQueues), and holds back new
-- ones until the pause commits.
SELECT pg_advisory_xact_lock($1::integer, hashtext($2::text));

-- name: QueueSetPaused
INSERT INTO drover_queues (name, paused, updated_at) VALUES ($1, $2, now())
ON CONFLICT (name) DO UPDATE SET paused = EXCLUDED.paused, updated_at = EXCLUDED.updated_at;

-- name: QueueSetResumed
-- A resume changes a queue's record, if it has one, and creates none: a queue
-- never paused needs none, and the upsert made one for any name resumed (a
-- typo too), which /queues and /metrics then listed for good.
UPDATE drover_queues SET paused = $2, updated_at = now() WHERE name = $1;

-- name: QueuesReady
-- A skip scan over drover_ready: one probe per queue that has queued jobs, then
-- one probe per priority of that queue, for its first four priorities, instead
-- of reading every ready row (the reconciler runs this every second, also under
-- a backlog of millions). Within a priority the key ascends by run_at, so the
-- priority's first entry tells whether any of its jobs is due; the probes stop
-- at the first that is. (One range over the queue's key with run_at <= now read
-- every job a priority held for later before it reached the next priority: 16
-- ms a second beside 200k jobs scheduled for tomorrow.) Past the fourth
-- priority, one such range over the rest: a probe for each of thousands of
-- priorities of a job each cost more than reading them (helper-3). The probes
-- start at the entry the queue's probe found: the entries before it are of rows
-- claimed since VACUUM last ran, thousands of index pages under load, and are
-- read once, not twice.
WITH RECURSIVE qs(queue, p, r, i) AS (
    (SELECT queue, priority, run_at, id FROM drover_ready
     ORDER BY queue, priority, run_at, id LIMIT 1)
    UNION ALL
    SELECT n.queue, n.priority, n.run_at, n.id FROM qs CROSS JOIN LATERAL (
        SELECT r.queue, r.priority, r.run_at, r.id FROM drover_ready r
        WHERE r.queue > qs.queue
        ORDER BY r.queue, r.priority, r.run_at, r.id LIMIT 1) n
)
SELECT qs.queue FROM qs
WHERE qs.queue IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM drover_queues q WHERE q.name = qs.queue AND q.paused)
  AND EXISTS (
      WITH RECURSIVE ps(p, r, n) AS (
          SELECT qs.p, qs.r, 1
          UNION ALL
          SELECT n.priority, n.run_at, ps.n + 1 FROM ps CROSS JOIN LATERAL (
              SELECT r.priority, r.run_at FROM drover_ready r
              WHERE r.queue = qs.queue AND r.priority > ps.p
              ORDER BY r.priority, r.run_at, r.id LIMIT 1) n
          WHERE ps.r > coalesce($1::timestamptz, now()) AND ps.n < 4
      )
      SELECT 1 FROM ps
      WHERE ps.r <= coalesce($1::timestamptz, now())
         OR ps.n = 4 AND EXISTS (SELECT 1 FROM drover_ready r
                                 WHERE r.queue = qs.queue AND r.priority > ps.p
                                   AND r.run_at <= coalesce($1::timestamptz, now())))
ORDER BY qs.queue;

-- name: WakeupPublish
SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q;

-- name: LeaderAttemptElect
-- Take the lease when there is none or it expired; extend it when we hold it:
-- our id and our Run's token ($4; another engine of the same id has another).
INSERT INTO drover_leader (name, leader_id, token, elected_at, expires_at)
VALUES ('default', $1, $4, coalesce($3::timestamptz, now()), coalesce($3::timestamptz, now()) + $2::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE SET
    leader_id = EXCLUDED.leader_id,
    token = EXCLUDED.token,
    elected_at = CASE WHEN drover_leader.leader_id = EXCLUDED.leader_id AND drover_leader.token = EXCLUDED.token
        THEN drover_leader.elected_at ELSE EXCLUDED.elected_at END,
    expires_at = EXCLUDED.expires_at
WHERE (drover_leader.leader_id = EXCLUDED.leader_id AND drover_leader.token = EXCLUDED.token)
   OR drover_leader.expires_at < EXCLUDED.elected_at
RETURNING leader_id, token;

-- name: LeaderResign
DELETE FROM drover_leader WHERE name = 'default' AND leader_id = $1 AND token = $2;

-- name: LeaderGet
SELECT leader_id, expires_at FROM drover_leader WHERE name = 'default';

-- name: CheckSets
-- Where the sets beside the job row (migration 006) disagree with the job rows,
-- one line each: a claimable job without its ready row (it would never be
-- claimed), a ready row whose job is not claimable with that key, a leased job
-- without a lease row that covers it in time (it would never be reaped), a
-- finished job without a row at its finished_at (never deleted by retention).
SELECT format('job %s is %s (queue %s, priority %s, run_at %s) but has no drover_ready row', id, status, queue, priority, run_at)
FROM drover_jobs j WHERE status IN ('queued','stalled')
  AND NOT EXISTS (SELECT 1 FROM drover_ready r
                  WHERE r.queue = j.queue AND r.priority = j.priority AND r.run_at = j.run_at AND r.id = j.id)
UNION ALL
SELECT format('drover_ready row (%s, %s, %s, %s) has no claimable job with that key', queue, priority, run_at, id)
FROM drover_ready r WHERE NOT EXISTS (SELECT 1 FROM drover_jobs j
    WHERE j.id = r.id AND j.status IN ('queued','stalled') AND j.queue = r.queue AND j.priority = r.priority AND j.run_at = r.run_at)
UNION ALL
SELECT format('job %s is %s until %s but no drover_leases row names it by then', id, status, lease_expires_at)
FROM drover_jobs j WHERE status IN ('claimed','running')
  AND NOT EXISTS (SELECT 1 FROM drover_leases l WHERE j.id = ANY (l.job_ids) AND l.expires_at <= j.lease_expires_at)
UNION ALL
SELECT format('job %s is %s since %s but no drover_finished row names it at that time', id, status, finished_at)
FROM drover_jobs j WHERE status IN ('succeeded','failed','canceled','skipped') AND finished_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM drover_finished f WHERE j.id = ANY (f.job_ids) AND f.finished_at = j.finished_at);

-- name: CheckCounts
-- Each queue and status whose count (migration 017) is not its number of jobs.
SELECT format('queue %s has %s jobs %s but its count (migration 017) says %s', queue, status, coalesce(real, 0), coalesce(kept, 0))
FROM (SELECT queue, status, count(*) AS real FROM drover_jobs GROUP BY queue, status) r
FULL JOIN (SELECT queue, status, sum(n) AS kept FROM (
        SELECT queue, status, n FROM drover_job_counts
        UNION ALL
        SELECT queue, status, n FROM drover_job_count_changes) c
    GROUP BY queue, status HAVING sum(n) <> 0) k USING (queue, status)
WHERE real IS DISTINCT FROM kept;

-- name: ReadyRepair
-- One step of the repair walk over the $2 jobs after id $1:
--   - a claimable job enqueued at least a minute ago that has no drover_ready
--     row gets one (a younger one waits for the next walk: while jobs wait,
--     most of them are young, and probing drover_ready for each of them was
--     ~2.6% of the two cores of the development machine, thirtieth session);
--   - a leased job whose lease has expired and that no drover_leases row covers
--     (one due no later than its lease) is named by a new lease row, due at
--     once, so the reaper's next pass reaps it.
-- One snapshot decides both: every transition writes the job and its set rows
-- in one transaction, so a row seen missing is missing, not in flight. A job
-- that changes after the snapshot leaves at worst a surplus row, which the next
-- claim (ready) or LeaseTidy (lease) removes. The lease check reads only the due
-- lease rows (expires_at <= a lease already past), which LeaseTidy keeps few.
-- The step's bounds come from the primary key alone (an index-only scan where
-- the pages are all-visible), and only the jobs that can need a repair are
-- read out of it: before, all $2 jobs were read and kept for the three reads
-- after it, ~19 against ~15 ms a step of 20,000 mostly finished jobs in the
-- harness's latency workload, 17.5 against 10 ms on a vacuumed table of 1M.
-- Answers the last id read (NULL past the end), how many were read, and the
-- ready and lease repairs.
WITH step AS (
    SELECT max(id) AS last, count(*) AS read FROM (SELECT id FROM drover_jobs WHERE id > $1 ORDER BY id LIMIT $2) w
),
scan AS (
    SELECT id, status, queue, priority, run_at, lease_expires_at, created_at FROM drover_jobs
    WHERE id > $1 AND id <= (SELECT last FROM step) AND status IN ('queued','stalled','claimed','running')
),
missing AS (
    INSERT INTO drover_ready (queue, priority, run_at, id)
    SELECT s.queue, s.priority, s.run_at, s.id FROM scan s
    WHERE s.status IN ('queued','stalled') AND s.created_at < now() - interval '1 minute'
      AND NOT EXISTS (SELECT 1 FROM drover_ready r
                      WHERE r.queue = s.queue AND r.priority = s.priority AND r.run_at = s.run_at AND r.id = s.id)
    ON CONFLICT DO NOTHING
    RETURNING id
),
uncovered AS (
    SELECT s.id, s.lease_expires_at FROM scan s
    WHERE s.status IN ('claimed','running') AND s.lease_expires_at < now()
      AND NOT EXISTS (SELECT 1 FROM drover_leases l
                      WHERE l.expires_at <= s.lease_expires_at AND s.id = ANY (l.job_ids))
),
leased AS (
    INSERT INTO drover_leases (expires_at, job_ids)
    SELECT min(lease_expires_at), array_agg(id ORDER BY id) FROM uncovered HAVING count(*) > 0
    RETURNING cardinality(job_ids) AS n
)
SELECT (SELECT last FROM step), (SELECT read FROM step), (SELECT count(*) FROM missing),
       coalesce((SELECT n FROM leased), 0);
