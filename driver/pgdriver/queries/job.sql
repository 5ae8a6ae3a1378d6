-- Queries of the PostgreSQL driver. Each state change is one statement: a CTE locks
-- the row under the lifecycle guard, the UPDATE repeats the guard (it is the fence),
-- and the event insert rides in the same statement, so a transition and its event
-- commit together or not at all. The sets beside the job row ride along the same
-- way (migration 006): a transition into queued inserts the job's drover_ready
-- row, a claim deletes it and writes a drover_leases row, and a transition into a
-- terminal status writes a drover_finished row, and every statement that inserts,
-- deletes or moves jobs between statuses adds what it changed to
-- drover_job_count_changes (migration 017, QueueCounts). $now is coalesce(param, now()): the database clock
-- decides unless a test injects a time.

-- name: JobInsertMany
-- Args and metadata travel as text and are cast to jsonb below (the same parse
-- as jsonb's binary form), as the batch completion's results do.
WITH input AS (
    SELECT * FROM unnest(
        $1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::timestamptz[],
        $7::int[], $8::bigint[], $9::text[], $10::bigint[], $11::bigint[], $12::text[], $14::text[]
    ) WITH ORDINALITY AS t(kind, queue, args, metadata, priority, run_at, max_attempts, timeout_ms,
                            idempotency_key, retry_of, workflow_run_id, workflow_node, actor, ord)
),
ins AS (
    -- The enqueued event is the row itself: enqueued_by is its actor (migration
    -- 008; JobEvents reads it).
    INSERT INTO drover_jobs (kind, queue, status, args, metadata, priority, run_at, max_attempts,
                             timeout_ms, idempotency_key, retry_of, workflow_run_id, workflow_node, created_at,
                             enqueued_by)
    SELECT kind, queue,
           CASE WHEN workflow_run_id IS NULL THEN 'queued' ELSE 'pending' END,
           args::jsonb, metadata::jsonb, priority, coalesce(run_at, coalesce($13::timestamptz, now())), max_attempts,
           timeout_ms, idempotency_key, retry_of, workflow_run_id, workflow_node, coalesce($13::timestamptz, now()),
           actor
    FROM input ORDER BY ord
    -- Sent without this clause when no job of the batch has a key (insertManyUnkeyed).
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING *
),
rdy AS (
    INSERT INTO drover_ready (queue, priority, run_at, id)
    SELECT queue, priority, run_at, id FROM ins WHERE status = 'queued'
),
counted AS (
    -- The counts (migration 017): grouped by queue alone (see JobStart).
    INSERT INTO drover_job_count_changes (queue, status, n)
    SELECT queue, status, n FROM (
        SELECT queue, unnest(ARRAY['queued', 'pending']) AS status, unnest(ARRAY[c - pending, pending]) AS n
        FROM (SELECT queue, count(*) AS c, count(*) FILTER (WHERE status = 'pending') AS pending FROM ins GROUP BY queue) g
    ) m WHERE n <> 0
),
woke AS (
    -- One NOTIFY per queue that got ready work; delivered when the insert
    -- commits. Only in the caller's transaction: on the pool the driver sends
    -- the wake-up after the commit (insertQueries).
    SELECT count(pg_notify($15, queue)) AS n FROM (
        SELECT DISTINCT queue FROM ins WHERE status = 'queued' AND run_at <= coalesce($13::timestamptz, now())
    ) ready
),
home AS (
    -- Only in the caller's transaction, whose database and search_path are the
    -- caller's: it must be on the driver's database ($17) and reach its
    -- schema's ($16) drover_jobs, or the jobs went into another installation's
    -- tables. The failed cast is the refusal.
    SELECT CASE WHEN current_database() <> $17::text
                THEN ('drover_database_mismatch: ' || $17::text || ' <> ' || current_database())::int
                WHEN 'drover_jobs'::regclass IS DISTINCT FROM to_regclass(format('%I.drover_jobs', $16::text))
                THEN ('drover_schema_mismatch: ' || $16::text || ' <> ' || ('drover_jobs'::regclass)::text)::int END AS refused
)
SELECT ins.* FROM ins, woke, home WHERE home.refused IS NULL ORDER BY id;

-- name: JobGetByKeys
SELECT * FROM drover_jobs WHERE idempotency_key = ANY($1::text[]);

-- name: JobGet
SELECT * FROM drover_jobs WHERE id = $1;

-- name: JobStatus
SELECT status, attempt FROM drover_jobs WHERE id = $1;

-- name: JobList
SELECT * FROM drover_jobs
WHERE (cardinality($1::text[]) = 0 OR status = ANY($1::text[]))
  AND ($2::text = '' OR queue = $2)
  AND ($3::text = '' OR kind = $3)
  AND ($4::bigint = 0 OR (CASE WHEN $6::bool THEN id > $4 ELSE id < $4 END))
ORDER BY CASE WHEN $6::bool THEN id END ASC, CASE WHEN NOT $6::bool THEN id END DESC
LIMIT $5;

-- name: JobEvents
-- Three events can be kept in compact form. A claim that starts its jobs at
-- once (a worker's claim) logs two events,
-- claimed then started, at the same instant by the same actor, and writes them as
-- one row: type 'claimed' with to_status 'running' (a lone claim's row has
-- to_status 'claimed'). The started event is that row's seq + 1, from claimed to
-- running, without a request_id. With the enqueued event kept in the job row
-- (below), a job writes two event rows instead of four: together the two cut the
-- machine's CPU a job by ~5% in continuous runs (bench/compare/HISTORY.md). A
-- succeeded event without a request_id is its row's finished_by (migration 009),
-- so a worker's job writes one event row, its claim's, and since migration 012
-- none: the claim's row is kept in the job row while its claim is live. Every
-- reader of the table unfolds the rows this way (internal/chaos reads it too).
SELECT job_id, seq, type, coalesce(from_status, '') AS from_status,
       CASE WHEN type = 'claimed' THEN 'claimed' ELSE to_status END AS to_status,
       at, actor, coalesce(request_id, '') AS request_id, attempt
FROM drover_job_events WHERE job_id = $1
UNION ALL
SELECT job_id, seq + 1, 'started', 'claimed', 'running', at, actor, '', attempt
FROM drover_job_events WHERE job_id = $1 AND type = 'claimed' AND to_status = 'running'
UNION ALL
-- The enqueued event of a job inserted since migration 008 (see its comment).
SELECT id, 1, 'enqueued', '', CASE WHEN workflow_run_id IS NULL THEN 'queued' ELSE 'pending' END,
       created_at, enqueued_by, '', 0
FROM drover_jobs WHERE id = $1 AND enqueued_by IS NOT NULL
UNION ALL
-- The succeeded event of a completion without a request_id (migration 009).
SELECT id, rev, 'succeeded', 'running', 'succeeded', finished_at, finished_by, '', attempt
FROM drover_jobs WHERE id = $1 AND finished_by IS NOT NULL
UNION ALL
-- The claimed and started events of a worker's claim while the row holds them
-- (migration 012 says when): at started_at, by the claim's worker.
SELECT id, claim_seq + s.d, s.type, s.from_status, s.to_status, started_at,
       CASE WHEN status = 'running' THEN 'worker:' || owner ELSE finished_by END, '', attempt
FROM drover_jobs CROSS JOIN (VALUES (0, 'claimed', 'queued', 'claimed'), (1, 'started', 'claimed', 'running')) AS s(d, type, from_status, to_status)
WHERE id = $1 AND claim_seq IS NOT NULL
  AND (status = 'running' OR (status = 'succeeded' AND finished_by IS NOT NULL))
ORDER BY seq;

-- name: EventSeen
-- The attempt at which the job's log holds request_id $1 (unique per job), and
-- the type of the event that holds it, if it does.
SELECT attempt, type FROM drover_job_events WHERE request_id = $1 AND job_id = $2;

-- name: ClaimSeen
-- Who made the claim of request_id $1, if one was made, or closed it without
-- one (ClaimClose).
SELECT actor FROM drover_job_events WHERE request_id = $1 AND type = 'claimed'
UNION ALL
SELECT actor FROM drover_claim_requests WHERE request_id = $1
LIMIT 1;

-- name: ClaimClose
-- Closes request_id $1, of which no claim was made, for actor $2: a claim of it
-- that runs later answers no jobs. Rows older than a day go with it.
WITH gone AS (
    DELETE FROM drover_claim_requests WHERE closed_at < now() - interval '1 day'
)
INSERT INTO drover_claim_requests (request_id, actor, closed_at) VALUES ($1, $2, now())
ON CONFLICT (request_id) DO NOTHING;

-- name: ClaimReplay
-- The jobs a repeated claim request took the first time that its owner still holds
-- under that claim.
SELECT j.* FROM drover_jobs j
JOIN drover_job_events e ON e.job_id = j.id
WHERE e.request_id = $1 AND e.type = 'claimed'
  AND j.owner = $2 AND j.attempt = e.attempt AND j.status IN ('claimed','running')
ORDER BY j.priority, j.run_at, j.id;

-- name: ClaimCandidatesInQueue
-- The first $2 claimable jobs of queue $1 in claim order, read without locks.
-- A claim naming several queues asks each queue this, merges the answers by
-- (priority, run_at, id) and claims the first LIMIT by id (JobClaimByID), which
-- locks each row and checks it again. One sort over every ready job of all the
-- queues read every one of them (a top-N sort is still a full scan of the
-- ready rows) and, on a large table, could cross jit_above_cost. The skip scan
-- is JobClaimQueue's (see there). A ready row whose job is no longer claimable
-- (see drover_ready) is not offered.
WITH RECURSIVE prios(p, r, i) AS (
    (SELECT priority, run_at, id FROM drover_ready
     WHERE queue = $1::text ORDER BY priority, run_at, id LIMIT 1)
    UNION ALL
    SELECT n.priority, n.run_at, n.id FROM prios CROSS JOIN LATERAL (
        SELECT priority, run_at, id FROM drover_ready
        WHERE queue = $1::text AND priority > prios.p
        ORDER BY priority, run_at, id LIMIT 1) n
)
SELECT c.id, c.priority, c.run_at FROM prios
CROSS JOIN LATERAL (
    SELECT r.id, r.priority, r.run_at FROM drover_ready r
    WHERE r.queue = $1::text AND r.priority = prios.p
      AND (r.run_at, r.id) >= (prios.r, prios.i)
      AND r.run_at <= coalesce($3::timestamptz, now())
      AND NOT EXISTS (SELECT 1 FROM drover_queues q WHERE q.name = $1::text AND q.paused)
      AND EXISTS (SELECT 1 FROM drover_jobs j WHERE j.id = r.id AND j.status IN ('queued','stalled'))
    ORDER BY r.run_at, r.id
    LIMIT $2
) c
LIMIT $2;

-- name: ClaimLockQueues
-- A claim's first statement, in its transaction: the queues it may claim from
-- ($2), each by an advisory lock ($1, hashtext(queue)) held shared until the
-- claim commits. QueuePause takes the queue's lock exclusively before it
-- writes, so it waits for every claim that may have read the queue unpaused
-- (a claim statement's snapshot is taken after this statement), and a claim
-- that asks for the lock meanwhile waits for the pause and then reads it.
-- Without it, a claim statement that began before a pause committed claimed
-- the queue's jobs after QueuePause returned. Taken in hash order, so that two
-- claims of several queues and two pauses never wait for each other in a cycle.
SELECT pg_advisory_xact_lock_shared($1::integer, h)
FROM (SELECT DISTINCT hashtext(q) AS h FROM unnest($2::text[]) AS u(q) ORDER BY h) s;

-- name: ClaimLockJobQueues
-- ClaimLockQueues for a claim by id: the queues of jobs $2.
SELECT pg_advisory_xact_lock_shared($1::integer, h)
FROM (SELECT DISTINCT hashtext(queue) AS h FROM drover_jobs WHERE id = ANY($2::bigint[]) ORDER BY h) s;

-- name: JobClaimQueue
-- JobClaim for one queue. A plain scan of drover_ready in (priority, run_at, id)
-- order cannot stop at run_at <= now (priority comes first), so with fewer ready
-- jobs than LIMIT it walked every future job of the queue; per priority, run_at
-- is a range bound.
WITH RECURSIVE prios(p, r, i) AS (
    -- The first entry of each priority present in the queue, by a skip scan of
    -- drover_ready's key: one descent per priority. The first one starts past
    -- the claimer's cursor ($8, $9, $10: where its last full claim ended; (0,
    -- NULL, 0) for none), but never past a priority before the cursor's. The
    -- entries between the index's start and the cursor are of rows claimed
    -- (deleted) since VACUUM last ran, still in the index, and, rarely, of jobs
    -- that became ready with an earlier key; the driver scans from the start
    -- often enough for those (claimCursors).
    (SELECT priority, run_at, id FROM (
        (SELECT priority, run_at, id FROM drover_ready
         WHERE queue = $1::text AND priority < $8::integer
         ORDER BY priority, run_at, id LIMIT 1)
        UNION ALL
        (SELECT priority, run_at, id FROM drover_ready
         WHERE queue = $1::text
           AND (priority, run_at, id) > ($8::integer, coalesce($9::timestamptz, '-infinity'), $10::bigint)
         ORDER BY priority, run_at, id LIMIT 1)
    ) first ORDER BY priority, run_at, id LIMIT 1)
    UNION ALL
    SELECT n.priority, n.run_at, n.id FROM prios CROSS JOIN LATERAL (
        SELECT priority, run_at, id FROM drover_ready
        WHERE queue = $1::text AND priority > prios.p
        ORDER BY priority, run_at, id LIMIT 1) n
),
cand AS (
    -- For a fixed priority, run_at <= now bounds the index range: only ready rows
    -- are read, however many jobs wait in the future. The range starts at the
    -- entry the probe found: the entries before it are of rows deleted (in this
    -- statement's snapshot) that VACUUM has not yet removed. After a burst of
    -- claims they fill thousands of index pages, and walking them twice (probe,
    -- then this scan) was most of a claim's time (auto_explain, 1M burn-down:
    -- 12 + 9 ms of a 25 ms claim).
    SELECT c.ctid AS rid FROM prios
    CROSS JOIN LATERAL (
        SELECT ctid FROM drover_ready
        WHERE queue = $1::text AND priority = prios.p
          AND (run_at, id) >= (prios.r, prios.i)
          AND run_at <= coalesce($5::timestamptz, now())
          AND NOT EXISTS (SELECT 1 FROM drover_queues q WHERE q.name = $1::text AND q.paused)
        ORDER BY run_at, id
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    ) c
    -- No ORDER BY: the nested loop already yields (priority, run_at, id) order
    -- (prios ascends, each lateral scan is ordered), so LIMIT takes the first $2
    -- and stops the scans there. A sort over the estimated rows of every
    -- priority made the plan's cost pass jit_above_cost, and the JIT compile took
    -- 15-30 ms of a claim that runs in 1 (EXPLAIN, 1M rows, claims of 1,000).
    LIMIT $2
),
taken AS (
    -- The locked ready rows, by their tuple ids (a TID scan): rows are only ever
    -- inserted and deleted, and a locked row cannot move.
    DELETE FROM drover_ready WHERE ctid = ANY (ARRAY(SELECT rid FROM cand))
    RETURNING id
),
was AS MATERIALIZED (
    -- The jobs' status before the claim, for the event's from_status, read in
    -- the statement's snapshot. A join of the UPDATE with drover_jobs by id
    -- alone let the generic plan walk the whole primary key once per job
    -- (TestClaimPlanUsesIndexesOnATinyTable). Materialized, it is one scan:
    -- inlined into the event's join, it was a probe per job that matched the
    -- whole id array again each time (EXPLAIN ANALYZE, claims of 1,000: 17 ms
    -- of a 32 ms claim). A worker's claim ($7 and no $6) writes an event only
    -- for a job that was stalled (claim_seq below): it reads nothing here (a
    -- one-time filter), and ev knows the status. The event's join read the
    -- first of these rows all the same, with the id array sorted for it.
    SELECT id, status FROM drover_jobs
    WHERE NOT ($7::bool AND $6 = '') AND id = ANY (ARRAY(SELECT id FROM taken))
),
j AS (
    -- The jobs of the taken rows, by primary key, whatever the table's size (a
    -- join let the planner pick a sequential scan of a small table, which then
    -- grew with every job: auto_explain, 1.5 ms of a 2 ms claim at 5k rows). The
    -- status guard leaves out a job whose row was stale (see drover_ready); its
    -- row is deleted all the same.
    UPDATE drover_jobs SET
        status = CASE WHEN $7::bool THEN 'running' ELSE 'claimed' END,
        attempt = attempt + 1, owner = $3, lease_token = gen_random_uuid(),
        lease_expires_at = coalesce($5::timestamptz, now()) + $4::bigint * interval '1 microsecond',
        executions = executions + CASE WHEN $7::bool THEN 1 ELSE 0 END,
        started_at = CASE WHEN $7::bool THEN coalesce($5::timestamptz, now()) ELSE started_at END,
        rev = rev + CASE WHEN $7::bool THEN 2 ELSE 1 END,
        -- A worker's claim keeps its event in the row (migration 012): the
        -- claimed event's seq, the new rev - 1; any other claim inserts it.
        claim_seq = CASE WHEN $7::bool AND $6 = '' AND status = 'queued' THEN rev + 1 END
    WHERE id = ANY (ARRAY(SELECT id FROM taken)) AND status IN ('queued','stalled')
    RETURNING *
),
ev AS (
    -- claimed, seq = rev after it; with start, the same row also records the
    -- started event that follows it (to_status 'running': see JobEvents).
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT j.id, CASE WHEN $7::bool THEN j.rev - 1 ELSE j.rev END, 'claimed', coalesce(was.status, 'stalled'),
           CASE WHEN $7::bool THEN 'running' ELSE 'claimed' END,
           coalesce($5::timestamptz, now()), 'worker:' || $3, nullif($6, ''), j.attempt
    FROM j LEFT JOIN was ON was.id = j.id
    WHERE j.claim_seq IS NULL
),
counted AS (
    -- The counts it changed (migration 017): its jobs leave queued (or
    -- stalled, as the event's from_status says: a worker's claim keeps its
    -- event in the row only for a job that was queued) for claimed or running.
    -- Grouped by queue alone (see JobStart).
    INSERT INTO drover_job_count_changes (queue, status, n)
    SELECT queue, status, n FROM (
        SELECT queue, unnest(ARRAY['queued', 'stalled', CASE WHEN $7::bool THEN 'running' ELSE 'claimed' END]) AS status,
               unnest(ARRAY[stalled - c, -stalled, c]) AS n
        FROM (
            SELECT j.queue, count(*) AS c,
                   count(*) FILTER (WHERE j.claim_seq IS NULL AND coalesce(was.status, 'stalled') = 'stalled') AS stalled
            FROM j LEFT JOIN was ON was.id = j.id GROUP BY j.queue
        ) g
    ) m WHERE n <> 0
),
lease AS (
    -- One row for the whole claim: every job of it got the same expiry.
    INSERT INTO drover_leases (expires_at, job_ids)
    SELECT min(lease_expires_at), array_agg(id) FROM j HAVING count(*) > 0
)
-- In the UPDATE's order (by id): the driver puts the jobs in claim order
-- (claimQueueFrom). A sort here copied every row of the answer once more, and
-- the rows already come in claim order when the queue's jobs share a priority
-- and run_at follows id, as it does for jobs enqueued to run now.
SELECT * FROM j;

-- name: JobClaimByID
-- Claims the jobs of $1 (one id, or the merged candidates of several queues)
-- that are still claimable; jobs another claimer holds are skipped. Like every
-- claim it locks the ready row before the job row (a cancel, which locks the job
-- first, skips a ready row that is locked), so two claims, or a claim and a
-- cancel, never wait for each other in a cycle.
WITH keys AS (
    SELECT queue, priority, run_at, id FROM drover_jobs
    WHERE id = ANY($1::bigint[]) AND status IN ('queued','stalled')
      AND run_at <= coalesce($4::timestamptz, now())
      AND NOT EXISTS (SELECT 1 FROM drover_queues q WHERE q.name = drover_jobs.queue AND q.paused)
),
cand AS (
    SELECT r.ctid AS rid FROM drover_ready r
    JOIN keys k ON r.queue = k.queue AND r.priority = k.priority AND r.run_at = k.run_at AND r.id = k.id
    FOR UPDATE OF r SKIP LOCKED
),
taken AS (
    DELETE FROM drover_ready WHERE ctid = ANY (ARRAY(SELECT rid FROM cand))
    RETURNING id
),
was AS MATERIALIZED (
    -- The jobs' status before the claim, for the event's from_status, read in
    -- the statement's snapshot. A join of the UPDATE with drover_jobs by id
    -- alone let the generic plan walk the whole primary key once per job
    -- (TestClaimPlanUsesIndexesOnATinyTable). Materialized, it is one scan:
    -- inlined into the event's join, it was a probe per job that matched the
    -- whole id array again each time (EXPLAIN ANALYZE, claims of 1,000: 17 ms
    -- of a 32 ms claim).
    SELECT id, status FROM drover_jobs WHERE id = ANY (ARRAY(SELECT id FROM taken))
),
j AS (
    UPDATE drover_jobs SET
        status = CASE WHEN $6::bool THEN 'running' ELSE 'claimed' END,
        attempt = attempt + 1, owner = $2, lease_token = gen_random_uuid(),
        lease_expires_at = coalesce($4::timestamptz, now()) + $3::bigint * interval '1 microsecond',
        executions = executions + CASE WHEN $6::bool THEN 1 ELSE 0 END,
        started_at = CASE WHEN $6::bool THEN coalesce($4::timestamptz, now()) ELSE started_at END,
        rev = rev + CASE WHEN $6::bool THEN 2 ELSE 1 END,
        -- A worker's claim keeps its event in the row (migration 012): the
        -- claimed event's seq, the new rev - 1; any other claim inserts it.
        claim_seq = CASE WHEN $6::bool AND $5 = '' AND status = 'queued' THEN rev + 1 END
    WHERE id = ANY (ARRAY(SELECT id FROM taken)) AND status IN ('queued','stalled')
    RETURNING *
),
ev AS (
    -- As JobClaimQueue's: one row for claimed and, with start, started.
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT j.id, CASE WHEN $6::bool THEN j.rev - 1 ELSE j.rev END, 'claimed', was.status,
           CASE WHEN $6::bool THEN 'running' ELSE 'claimed' END,
           coalesce($4::timestamptz, now()), 'worker:' || $2, nullif($5, ''), j.attempt
    FROM j JOIN was ON was.id = j.id
    WHERE j.claim_seq IS NULL
),
counted AS (
    -- As JobClaimQueue's: its jobs leave queued or stalled (the event's
    -- from_status) for claimed or running.
    INSERT INTO drover_job_count_changes (queue, status, n)
    SELECT queue, status, n FROM (
        SELECT queue, unnest(ARRAY['queued', 'stalled', CASE WHEN $6::bool THEN 'running' ELSE 'claimed' END]) AS status,
               unnest(ARRAY[stalled - c, -stalled, c]) AS n
        FROM (
            SELECT j.queue, count(*) AS c, count(*) FILTER (WHERE was.status = 'stalled') AS stalled
            FROM j JOIN was ON was.id = j.id GROUP BY j.queue
        ) g
    ) m WHERE n <> 0
),
lease AS (
    INSERT INTO drover_leases (expires_at, job_ids)
    SELECT min(lease_expires_at), array_agg(id) FROM j HAVING count(*) > 0
)
SELECT * FROM j ORDER BY priority, run_at, id;

-- name: JobStart
-- A start that moves the lease earlier than the claim set it writes a
-- drover_leases row for the job, so the reaper finds it in time.
WITH cur AS (
    -- A request_id the job's log holds (from another attempt) is left to the
    -- caller's diagnosis: in JobStartMany's transaction, its event's unique
    -- violation would fail every start of the batch.
    SELECT id, owner, lease_expires_at AS old_lease FROM drover_jobs
    WHERE id = $1 AND status = 'claimed' AND attempt = $2 AND lease_token = $3::uuid
      AND NOT EXISTS (SELECT 1 FROM drover_job_events e WHERE e.job_id = $1 AND e.request_id = nullif($4, ''))
    FOR UPDATE
),
j AS (
    UPDATE drover_jobs SET
        status = 'running', executions = executions + 1, started_at = coalesce($5::timestamptz, now()),
        lease_expires_at = CASE WHEN $6::bigint > 0
            THEN coalesce($5::timestamptz, now()) + $6::bigint * interval '1 microsecond'
            ELSE lease_expires_at END,
        rev = rev + 1
    FROM cur
    WHERE drover_jobs.id = cur.id AND drover_jobs.status = 'claimed' AND drover_jobs.attempt = $2 AND drover_jobs.lease_token = $3::uuid
    RETURNING drover_jobs.*, cur.owner AS old_owner, cur.old_lease
),
ev AS (
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, rev, 'started', 'claimed', 'running', started_at, 'worker:' || old_owner, nullif($4, ''), attempt FROM j
),
lease AS (
    INSERT INTO drover_leases (expires_at, job_ids)
    SELECT lease_expires_at, ARRAY[id] FROM j WHERE lease_expires_at < old_lease
),
counted AS (
    -- The counts it changed (migration 017): its jobs leave claimed for running.
    -- Grouped by queue alone, so a batch adds a row each; a group key of
    -- either status too cost a batch completion 0.6 instead of 0.1 µs a job
    -- (BenchmarkCompleteMany500).
    INSERT INTO drover_job_count_changes (queue, status, n)
    SELECT queue, unnest(ARRAY['claimed', 'running']), unnest(ARRAY[-c, c]) FROM (
        SELECT queue, count(*) AS c FROM j GROUP BY queue
    ) g
)
SELECT * FROM j;

-- name: JobUnclaim
WITH cur AS (
    SELECT id, owner FROM drover_jobs
    WHERE id = $1 AND status = 'claimed' AND attempt = $2 AND lease_token = $3::uuid
    FOR UPDATE
),
j AS (
    UPDATE drover_jobs SET
        status = 'queued', owner = NULL, lease_token = NULL, lease_expires_at = NULL, rev = rev + 1
    FROM cur
    WHERE drover_jobs.id = cur.id AND drover_jobs.status = 'claimed' AND drover_jobs.attempt = $2 AND drover_jobs.lease_token = $3::uuid
    RETURNING drover_jobs.*, cur.owner AS old_owner
),
ev AS (
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, rev, 'unclaimed', 'claimed', 'queued', coalesce($5::timestamptz, now()), 'worker:' || old_owner, nullif($4, ''), attempt FROM j
),
rdy AS (
    INSERT INTO drover_ready (queue, priority, run_at, id)
    SELECT queue, priority, run_at, id FROM j ON CONFLICT DO NOTHING
),
counted AS (
    -- The counts it changed (migration 017): its jobs leave claimed for queued.
    -- Grouped by queue alone, so a batch adds a row each; a group key of
    -- either status too cost a batch completion 0.6 instead of 0.1 µs a job
    -- (BenchmarkCompleteMany500).
    INSERT INTO drover_job_count_changes (queue, status, n)
    SELECT queue, unnest(ARRAY['claimed', 'queued']), unnest(ARRAY[-c, c]) FROM (
        SELECT queue, count(*) AS c FROM j GROUP BY queue
    ) g
)
SELECT * FROM j;

-- name: JobHeartbeat
-- What it does and why: JobHeartbeat's comment. (Kept short: a test finds the
-- event type below in pg_stat_activity, which keeps a statement's first 1 kB.)
WITH j AS (
    UPDATE drover_jobs SET
        lease_expires_at = greatest(lease_expires_at, least(coalesce($5::timestamptz, now()), CASE WHEN status = 'running'
            AND timeout_ms > 0 THEN started_at + timeout_ms * interval '1 ms' END)
            + $6::bigint * interval '1 microsecond'),
        rev = rev + 1
    WHERE id = $1 AND status IN ('claimed','running') AND attempt = $2 AND lease_token = $3::uuid
    RETURNING *
),
ev AS (
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, rev, 'heartbeat', status, status, coalesce($5::timestamptz, now()), 'worker:' || owner, $4, attempt
    FROM j WHERE $4 <> ''
)
SELECT * FROM j;

-- name: JobComplete
WITH cur AS (
    SELECT id, owner, claim_seq FROM drover_jobs
    WHERE id = $1 AND status = 'running' AND attempt = $2 AND lease_token = $3::uuid
    FOR UPDATE
),
j AS (
    UPDATE drover_jobs SET
        status = 'succeeded', result = $6::jsonb, finished_at = coalesce($5::timestamptz, now()),
        -- Without a request_id the succeeded event is the row (migration 009),
        -- and the claim's events stay in it (012); with one they leave it.
        finished_by = CASE WHEN $4 = '' THEN 'worker:' || cur.owner END,
        claim_seq = CASE WHEN $4 = '' THEN cur.claim_seq END,
        owner = NULL, lease_token = NULL, lease_expires_at = NULL, rev = rev + 1
    FROM cur
    WHERE drover_jobs.id = cur.id AND drover_jobs.status = 'running' AND drover_jobs.attempt = $2 AND drover_jobs.lease_token = $3::uuid
    RETURNING drover_jobs.*, cur.owner AS old_owner, cur.claim_seq AS old_claim_seq
),
ev AS (
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, rev, 'succeeded', 'running', 'succeeded', finished_at, 'worker:' || old_owner, $4, attempt FROM j
    WHERE $4 <> ''
),
kept AS (
    -- The claim's events the row kept (migration 012) leave it with the claim.
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, old_claim_seq, 'claimed', 'queued', 'running', started_at, 'worker:' || old_owner, NULL, attempt
    FROM j WHERE old_claim_seq IS NOT NULL AND claim_seq IS NULL
),
fin AS (
    INSERT INTO drover_finished (finished_at, job_ids) SELECT finished_at, ARRAY[id] FROM j
),
counted AS (
    -- The counts it changed (migration 017): its jobs leave running for succeeded.
    -- Grouped by queue alone, so a batch adds a row each; a group key of
    -- either status too cost a batch completion 0.6 instead of 0.1 µs a job
    -- (BenchmarkCompleteMany500).
    INSERT INTO drover_job_count_changes (queue, status, n)
    SELECT queue, unnest(ARRAY['running', 'succeeded']), unnest(ARRAY[-c, c]) FROM (
        SELECT queue, count(*) AS c FROM j GROUP BY queue
    ) g
)
SELECT * FROM j;

-- name: JobFail
-- Retry while the execution budget lasts and the error is retryable; else fail.
-- The error joins the history either way.
WITH cur AS (
    SELECT id, owner, claim_seq, (NOT $7::bool AND executions < max_attempts) AS retry FROM drover_jobs
    WHERE id = $1 AND status = 'running' AND attempt = $2 AND lease_token = $3::uuid
    FOR UPDATE
),
j AS (
    UPDATE drover_jobs SET
        status = CASE WHEN cur.retry THEN 'queued' ELSE 'failed' END,
        run_at = CASE WHEN cur.retry
            THEN coalesce($8::timestamptz, coalesce($5::timestamptz, now()) + $10::bigint * interval '1 microsecond')
            ELSE run_at END,
        error = CASE WHEN cur.retry THEN NULL ELSE $6::text END,
        finished_at = CASE WHEN cur.retry THEN NULL ELSE coalesce($5::timestamptz, now()) END,
        errors = errors || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
            'attempt', attempt, 'at', coalesce($5::timestamptz, now()), 'error', $6::text, 'stack', nullif($9::text, '')))),
        owner = NULL, lease_token = NULL, lease_expires_at = NULL, rev = rev + 1, claim_seq = NULL
    FROM cur
    WHERE drover_jobs.id = cur.id AND drover_jobs.status = 'running' AND drover_jobs.attempt = $2 AND drover_jobs.lease_token = $3::uuid
    RETURNING drover_jobs.*, cur.owner AS old_owner, cur.claim_seq AS old_claim_seq
),
ev AS (
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, rev, CASE WHEN status = 'queued' THEN 'retried' ELSE 'failed' END, 'running', status,
           coalesce($5::timestamptz, now()), 'worker:' || old_owner, nullif($4, ''), attempt FROM j
),
kept AS (
    -- The claim's events the row kept (migration 012) leave it with the claim.
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, old_claim_seq, 'claimed', 'queued', 'running', started_at, 'worker:' || old_owner, NULL, attempt
    FROM j WHERE old_claim_seq IS NOT NULL AND claim_seq IS NULL
),
rdy AS (
    INSERT INTO drover_ready (queue, priority, run_at, id)
    SELECT queue, priority, run_at, id FROM j WHERE status = 'queued' ON CONFLICT DO NOTHING
),
fin AS (
    INSERT INTO drover_finished (finished_at, job_ids) SELECT finished_at, ARRAY[id] FROM j WHERE status = 'failed'
),
counted AS (
    -- The counts it changed (migration 017): each job leaves its old status
    -- for its new. Grouped first, so a batch adds a row or two (the two
    -- unnests go in step: a row each for old and new).
    INSERT INTO drover_job_count_changes (queue, status, n)
    SELECT queue, unnest(ARRAY[old, status]), unnest(ARRAY[-c, c]) FROM (
        SELECT j.queue, 'running' AS old, j.status, count(*) AS c FROM j GROUP BY 1, 2, 3
    ) g WHERE old <> status
)
SELECT * FROM j;

-- name: JobSnooze
WITH cur AS (
    SELECT id, owner, claim_seq FROM drover_jobs
    WHERE id = $1 AND status = 'running' AND attempt = $2 AND lease_token = $3::uuid
    FOR UPDATE
),
j AS (
    UPDATE drover_jobs SET
        status = 'queued',
        run_at = coalesce($6::timestamptz, coalesce($5::timestamptz, now()) + $7::bigint * interval '1 microsecond'),
        executions = executions - 1,
        owner = NULL, lease_token = NULL, lease_expires_at = NULL, rev = rev + 1, claim_seq = NULL
    FROM cur
    WHERE drover_jobs.id = cur.id AND drover_jobs.status = 'running' AND drover_jobs.attempt = $2 AND drover_jobs.lease_token = $3::uuid
    RETURNING drover_jobs.*, cur.owner AS old_owner, cur.claim_seq AS old_claim_seq
),
ev AS (
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, rev, 'snoozed', 'running', 'queued', coalesce($5::timestamptz, now()), 'worker:' || old_owner, nullif($4, ''), attempt FROM j
),
kept AS (
    -- The claim's events the row kept (migration 012) leave it with the claim.
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, old_claim_seq, 'claimed', 'queued', 'running', started_at, 'worker:' || old_owner, NULL, attempt
    FROM j WHERE old_claim_seq IS NOT NULL AND claim_seq IS NULL
),
rdy AS (
    INSERT INTO drover_ready (queue, priority, run_at, id)
    SELECT queue, priority, run_at, id FROM j ON CONFLICT DO NOTHING
),
counted AS (
    -- The counts it changed (migration 017): its jobs leave running for queued.
    -- Grouped by queue alone, so a batch adds a row each; a group key of
    -- either status too cost a batch completion 0.6 instead of 0.1 µs a job
    -- (BenchmarkCompleteMany500).
    INSERT INTO drover_job_count_changes (queue, status, n)
    SELECT queue, unnest(ARRAY['running', 'queued']), unnest(ARRAY[-c, c]) FROM (
        SELECT queue, count(*) AS c FROM j GROUP BY queue
    ) g
)
SELECT * FROM j;

-- name: JobCancel
-- A queued job's ready row is deleted unless a claim holds it: that claim deletes
-- it, and its update of the job, which waits for this statement, then finds the
-- job canceled and leaves it. Waiting for the row instead, while holding the job,
-- would close a cycle with that claim (see JobClaimByID).
-- When cur waited for a transition that changed the job, the UPDATE (which
-- reads the version of the statement's snapshot) matches nothing, nothing is
-- written, and the caller runs the statement again.
WITH cur AS (
    SELECT id, status, queue, priority, run_at, owner, claim_seq FROM drover_jobs
    WHERE id = $1 AND status NOT IN ('succeeded','failed','canceled','skipped')
    FOR UPDATE
),
j AS (
    UPDATE drover_jobs SET
        status = 'canceled', finished_at = coalesce($4::timestamptz, now()),
        -- The token the cancel clears (migration 016), which the canceled
        -- attempt's heartbeat is checked against (JobCanceledHolder).
        cancel_token = drover_jobs.lease_token,
        owner = NULL, lease_token = NULL, lease_expires_at = NULL, rev = rev + 1, claim_seq = NULL
    FROM cur
    WHERE drover_jobs.id = cur.id AND drover_jobs.status = cur.status
    RETURNING drover_jobs.*, cur.status AS old_status, cur.owner AS old_owner, cur.claim_seq AS old_claim_seq
),
ev AS (
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, rev, 'canceled', old_status, 'canceled', finished_at, $3, nullif($2, ''), attempt FROM j
),
kept AS (
    -- The claim's events the row kept (migration 012) leave it with the claim.
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, old_claim_seq, 'claimed', 'queued', 'running', started_at, 'worker:' || old_owner, NULL, attempt
    FROM j WHERE old_claim_seq IS NOT NULL AND claim_seq IS NULL
),
unready AS (
    DELETE FROM drover_ready WHERE ctid = ANY (ARRAY(
        SELECT r.ctid FROM drover_ready r JOIN cur
          ON r.queue = cur.queue AND r.priority = cur.priority AND r.run_at = cur.run_at AND r.id = cur.id
        WHERE cur.status IN ('queued','stalled') AND EXISTS (SELECT 1 FROM j)
        FOR UPDATE OF r SKIP LOCKED))
),
fin AS (
    INSERT INTO drover_finished (finished_at, job_ids) SELECT finished_at, ARRAY[id] FROM j
),
counted AS (
    -- The counts it changed (migration 017): each job leaves its old status
    -- for its new. Grouped first, so a batch adds a row or two (the two
    -- unnests go in step: a row each for old and new).
    INSERT INTO drover_job_count_changes (queue, status, n)
    SELECT queue, unnest(ARRAY[old, status]), unnest(ARRAY[-c, c]) FROM (
        SELECT j.queue, old_status AS old, j.status, count(*) AS c FROM j GROUP BY 1, 2, 3
    ) g WHERE old <> status
)
SELECT * FROM j;

-- name: JobCanceledHolder
-- Whether job $1 was canceled during attempt $2 while lease token $3 held it
-- (migration 016): that token's heartbeat answers cancel requested, any other
-- lease lost.
SELECT EXISTS (SELECT 1 FROM drover_jobs
               WHERE id = $1 AND status = 'canceled' AND attempt = $2 AND cancel_token = $3::uuid);

-- name: JobReapExpired
-- Lease reaper: claimed/running past its lease → stalled → queued (or failed when a
-- running attempt used up the budget), two events, one statement. The jobs are
-- found through the drover_leases rows that are due (LeaseTidy runs first, so
-- those are mostly rows with an expired job); each job's own lease decides.
WITH due AS (
    SELECT u.id FROM (
        SELECT job_ids FROM drover_leases WHERE expires_at < coalesce($2::timestamptz, now())
        ORDER BY expires_at LIMIT 100
    ) l CROSS JOIN LATERAL unnest(l.job_ids) AS u(id)
),
cur AS (
    SELECT id, status, owner, claim_seq FROM drover_jobs
    WHERE id = ANY (ARRAY(SELECT id FROM due))
      AND status IN ('claimed','running') AND lease_expires_at < coalesce($2::timestamptz, now())
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
),
j AS (
    UPDATE drover_jobs SET
        status = CASE WHEN cur.status = 'running' AND executions >= max_attempts THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN cur.status = 'running' AND executions >= max_attempts
            THEN 'lease expired while running; attempts exhausted' END,
        finished_at = CASE WHEN cur.status = 'running' AND executions >= max_attempts
            THEN coalesce($2::timestamptz, now()) END,
        run_at = CASE WHEN cur.status = 'running' AND executions >= max_attempts
            THEN run_at ELSE coalesce($2::timestamptz, now()) END,
        errors = CASE WHEN cur.status = 'running' THEN errors || jsonb_build_array(jsonb_build_object(
            'attempt', attempt, 'at', coalesce($2::timestamptz, now()),
            -- Past its timeout when the lease ran out, the attempt outlived
            -- it (its holder ran on past timeout_seconds, or died within a
            -- lease before it); before it, the holder stopped renewing.
            -- Identical to sqlitedriver's (job_reaper.go).
            'error', CASE WHEN timeout_ms > 0 AND lease_expires_at > started_at + timeout_ms * interval '1 ms'
                THEN 'lease expired while running past its timeout (the handler overran timeout_seconds, or its worker died)'
                ELSE 'lease expired while running (worker presumed dead)' END)) ELSE errors END,
        owner = NULL, lease_token = NULL, lease_expires_at = NULL, rev = rev + 2, claim_seq = NULL
    FROM cur
    WHERE drover_jobs.id = cur.id AND drover_jobs.status = cur.status
      AND drover_jobs.lease_expires_at < coalesce($2::timestamptz, now())
    RETURNING drover_jobs.*, cur.status AS old_status, cur.owner AS old_owner, cur.claim_seq AS old_claim_seq
),
ev AS (
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, rev - 1, 'stalled', old_status, 'stalled', coalesce($2::timestamptz, now()), 'engine', NULL, attempt FROM j
    UNION ALL
    SELECT id, rev, CASE WHEN status = 'failed' THEN 'failed' ELSE 'requeued' END, 'stalled', status,
           coalesce($2::timestamptz, now()), 'engine', NULL, attempt FROM j
),
kept AS (
    -- The claim's events the row kept (migration 012) leave it with the claim.
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, old_claim_seq, 'claimed', 'queued', 'running', started_at, 'worker:' || old_owner, NULL, attempt
    FROM j WHERE old_claim_seq IS NOT NULL AND claim_seq IS NULL
),
rdy AS (
    INSERT INTO drover_ready (queue, priority, run_at, id)
    SELECT queue, priority, run_at, id FROM j WHERE status = 'queued' ON CONFLICT DO NOTHING
),
fin AS (
    INSERT INTO drover_finished (finished_at, job_ids)
    SELECT min(finished_at), array_agg(id) FROM j WHERE status = 'failed' HAVING count(*) > 0
),
counted AS (
    -- The counts it changed (migration 017): each job leaves its old status
    -- for its new. Grouped first, so a batch adds a row or two (the two
    -- unnests go in step: a row each for old and new).
    INSERT INTO drover_job_count_changes (queue, status, n)
    SELECT queue, unnest(ARRAY[old, status]), unnest(ARRAY[-c, c]) FROM (
        SELECT j.queue, old_status AS old, j.status, count(*) AS c FROM j GROUP BY 1, 2, 3
    ) g WHERE old <> status
)
SELECT * FROM j ORDER BY id;

-- name: JobReapCandidates
-- The jobs JobReapExpired reads, ids only and unlocked: when the database
-- refuses its statement, each of them is reaped by a statement of its own.
-- $3 are the jobs whose reap the call was refused: it reads past them, and
-- past the lease rows that hold no other job, to the next expired leases.
SELECT id FROM drover_jobs
WHERE id = ANY (ARRAY(
        SELECT u.id FROM (
            SELECT job_ids FROM drover_leases WHERE expires_at < coalesce($2::timestamptz, now())
              AND NOT job_ids <@ $3::bigint[]
            ORDER BY expires_at LIMIT 100
        ) l CROSS JOIN LATERAL unnest(l.job_ids) AS u(id)))
  AND status IN ('claimed','running') AND lease_expires_at < coalesce($2::timestamptz, now())
  AND id <> ALL ($3::bigint[])
ORDER BY lease_expires_at
LIMIT $1;

-- name: LeaseTidy
-- Of the drover_leases rows that are due, deletes those none of whose jobs is
-- leased any more and moves the rest to the earliest lease among their leased
-- jobs (a heartbeat extended them). A job leased again since is covered by the
-- row of the claim that leased it.
WITH due AS (
    SELECT id, job_ids FROM drover_leases WHERE expires_at < coalesce($1::timestamptz, now())
    ORDER BY expires_at LIMIT $2
    FOR UPDATE SKIP LOCKED
),
live AS (
    SELECT d.id, min(j.lease_expires_at) AS e
    FROM due d CROSS JOIN LATERAL unnest(d.job_ids) AS u(id)
    JOIN drover_jobs j ON j.id = u.id
    WHERE j.status IN ('claimed','running')
    GROUP BY d.id
),
gone AS (
    DELETE FROM drover_leases WHERE id IN (SELECT id FROM due) AND id NOT IN (SELECT id FROM live)
    RETURNING id
),
moved AS (
    UPDATE drover_leases l SET expires_at = live.e FROM live WHERE l.id = live.id AND live.e > l.expires_at
    RETURNING l.id
)
SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM moved);

-- name: JobDLQLock
-- Locks the failed job a requeue copies, so that two requeues of it take turns:
-- the second one's next statement, in a fresh snapshot (READ COMMITTED), finds
-- the first one's job. A job that is not failed is not locked: no row.
SELECT true FROM drover_jobs WHERE id = $1 AND status = 'failed' FOR NO KEY UPDATE;

-- name: JobDLQRetry
-- The job an earlier requeue of failed job $1 created (drover_jobs_retry_of_idx).
SELECT * FROM drover_jobs WHERE retry_of = $1 ORDER BY id LIMIT 1;

-- name: JobDLQRequeue
WITH src AS (
    SELECT * FROM drover_jobs WHERE id = $1 AND status = 'failed'
),
ins AS (
    -- enqueued_by: the new job's enqueued event (see JobInsertMany).
    INSERT INTO drover_jobs (kind, queue, status, args, metadata, priority, run_at, max_attempts, timeout_ms, retry_of, created_at,
                             enqueued_by)
    SELECT kind, queue, 'queued', args, metadata, priority, now(), max_attempts, timeout_ms, id, now(), $2::text FROM src
    RETURNING *
),
rdy AS (
    INSERT INTO drover_ready (queue, priority, run_at, id) SELECT queue, priority, run_at, id FROM ins
),
counted AS (
    -- The counts (migration 017).
    INSERT INTO drover_job_count_changes (queue, status, n) SELECT queue, status, 1 FROM ins
)
SELECT * FROM ins;

-- name: JobDeleteFinished
-- At most $2 terminal jobs finished before $1 (NULL: more than $3 microseconds
-- before now(), the clock finished_at was written by), found through the
-- drover_finished rows of that age, and their events. Answers the count and the
-- rows read, which FinishedTidy then deletes once their jobs are all gone.
WITH cutoff AS MATERIALIZED (
    SELECT coalesce($1::timestamptz, now() - $3::bigint * interval '1 microsecond') AS at
),
src AS (
    SELECT id, job_ids FROM drover_finished WHERE finished_at < (SELECT at FROM cutoff)
    ORDER BY finished_at, id LIMIT $2
    FOR UPDATE SKIP LOCKED
),
d AS (
    -- The jobs are locked in id order before any is deleted, as the DLQ purge
    -- locks its own: deleting in a join's order, this and a purge of the same
    -- failed jobs deadlocked (TestDLQPurgeAndRetentionDoNotDeadlock).
    DELETE FROM drover_jobs WHERE id = ANY (ARRAY(
        SELECT id FROM drover_jobs
        WHERE id = ANY (ARRAY(SELECT unnest(job_ids) FROM src))
          AND status IN ('succeeded','failed','canceled','skipped') AND finished_at < (SELECT at FROM cutoff)
        ORDER BY id LIMIT $2
        FOR UPDATE))
    RETURNING id, queue, status
),
e AS (
    DELETE FROM drover_job_events WHERE job_id IN (SELECT id FROM d)
),
counted AS (
    -- The counts (migration 017).
    INSERT INTO drover_job_count_changes (queue, status, n)
    SELECT queue, status, -count(*) FROM d GROUP BY queue, status
)
SELECT (SELECT count(*) FROM d), ARRAY(SELECT id FROM src);

-- name: FinishedTidy
DELETE FROM drover_finished f WHERE f.id = ANY ($1::bigint[])
  AND NOT EXISTS (SELECT 1 FROM drover_jobs j WHERE j.id = ANY (f.job_ids));

-- name: JobDLQPurge
-- The failed jobs are locked in id order before any is deleted, as retention
-- locks the jobs it deletes (JobDeleteFinished): in the DLQ index's (queue, id)
-- order, a purge and retention deadlocked over the same jobs.
WITH victims AS MATERIALIZED (
    SELECT id FROM drover_jobs WHERE status = 'failed' AND error IS NOT NULL AND ($1::text = '' OR queue = $1)
    ORDER BY id
    FOR UPDATE
),
d AS (
    DELETE FROM drover_jobs WHERE id = ANY (ARRAY(SELECT id FROM victims))
    RETURNING id, queue, status
),
e AS (
    DELETE FROM drover_job_events WHERE job_id IN (SELECT id FROM d)
),
counted AS (
    -- The counts (migration 017).
    INSERT INTO drover_job_count_changes (queue, status, n)
    SELECT queue, status, -count(*) FROM d GROUP BY queue, status
)
SELECT count(*) FROM d;

-- name: JobCompleteMany
-- Many completions in one statement, each fenced on its own by the UPDATE's guard
-- (status, attempt, lease_token). No rows are locked ahead: concurrent batches
-- name disjoint jobs (a job has one lease holder), and the primary-key lookup
-- ($1, sorted by the caller) visits ids in order; it runs under
-- completePlanSettings. The owner the completion is recorded under is the one
-- the row had before the UPDATE cleared it: SET reads the old row, and gone's
-- scalar subqueries (the owner, and the claim_seq a request_id's completion
-- clears) read the statement's snapshot, which a data-modifying CTE does not
-- change. Only a claim writes owner or a non-NULL claim_seq, always with a
-- fresh lease_token (every other statement clears owner and lease_token both or
-- neither), so a row version that passes the guard has the owner and claim_seq
-- of the snapshot's version, which passed it too (the scan's filter, before
-- EvalPlanQual rechecks the latest).
-- (A second scan of drover_jobs joined into the UPDATE for the owner cost a
-- second primary-key probe per job.)
-- Rows whose guard fails are absent from the answer and diagnosed by the caller;
-- the caller sends each job once.
WITH input AS (
    -- The results travel as text (cast below, the same parse jsonb's binary
    -- form gets): pgx sends a text array's elements without boxing each.
    SELECT * FROM unnest($1::bigint[], $2::int[], $3::uuid[], $4::text[], $5::text[]) WITH ORDINALITY
        AS t(id, attempt, token, result, request_id, ord)
),
j AS (
    UPDATE drover_jobs SET
        status = 'succeeded', result = input.result::jsonb, finished_at = coalesce($6::timestamptz, now()),
        -- As JobComplete's: without a request_id the events stay in the row.
        finished_by = CASE WHEN input.request_id = '' THEN 'worker:' || drover_jobs.owner END,
        claim_seq = CASE WHEN input.request_id = '' THEN drover_jobs.claim_seq END,
        owner = NULL, lease_token = NULL, lease_expires_at = NULL, rev = drover_jobs.rev + 1
    FROM input
    WHERE drover_jobs.id = ANY ($1::bigint[]) AND drover_jobs.id = input.id
      AND drover_jobs.status = 'running' AND drover_jobs.attempt = input.attempt AND drover_jobs.lease_token = input.token
      -- A request_id the job's log holds (from another attempt: a repeat of
      -- this one finds the job succeeded) is left to the caller's diagnosis,
      -- which refuses it; its event would break the (job_id, request_id)
      -- index and fail the whole batch. Not evaluated without a request_id.
      AND (input.request_id = '' OR NOT EXISTS (
          SELECT 1 FROM drover_job_events e WHERE e.job_id = input.id AND e.request_id = input.request_id))
    -- completeManyOrds (job_transition.go) returns only the columns gone, fin
    -- and its answer read: keep it in step with them.
    RETURNING drover_jobs.*, input.request_id AS req, input.ord AS ord
),
gone AS MATERIALIZED (
    -- The rows that leave with a request_id, as the statement's snapshot has
    -- them: the owner and the claim's kept events (migration 012) they had.
    -- (Scalar subqueries: each a primary-key probe, whatever the plan settings.)
    SELECT id, rev, finished_at, started_at, attempt, req,
           (SELECT o.owner FROM drover_jobs o WHERE o.id = j.id) AS owner,
           (SELECT o.claim_seq FROM drover_jobs o WHERE o.id = j.id) AS claim_seq
    FROM j WHERE req <> ''
),
ev AS (
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    SELECT id, rev, 'succeeded', 'running', 'succeeded', finished_at, 'worker:' || owner, req, attempt FROM gone
    UNION ALL
    -- The claim's events the row kept leave it with the claim.
    SELECT id, claim_seq, 'claimed', 'queued', 'running', started_at, 'worker:' || owner, NULL, attempt FROM gone
    WHERE claim_seq IS NOT NULL
),
fin AS (
    -- One row for the batch: its jobs share finished_at.
    INSERT INTO drover_finished (finished_at, job_ids)
    SELECT coalesce($6::timestamptz, now()), array_agg(id) FROM j HAVING count(*) > 0
),
counted AS (
    -- The counts it changed (migration 017): its jobs leave running for succeeded.
    -- Grouped by queue alone, so a batch adds a row each; a group key of
    -- either status too cost a batch completion 0.6 instead of 0.1 µs a job
    -- (BenchmarkCompleteMany500).
    INSERT INTO drover_job_count_changes (queue, status, n)
    SELECT queue, unnest(ARRAY['running', 'succeeded']), unnest(ARRAY[-c, c]) FROM (
        SELECT queue, count(*) AS c FROM j GROUP BY queue
    ) g
)
SELECT * FROM j;
