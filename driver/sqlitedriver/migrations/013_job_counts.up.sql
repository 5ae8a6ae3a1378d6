-- Counts of jobs by queue and status, kept as the jobs change, so that GET
-- /queues and the drover_jobs gauge read a few rows instead of grouping every
-- job the retention keeps (0.8 s for 1M jobs, on every call and every scrape),
-- as pgdriver's migration 017 does. Every statement of the driver that inserts
-- or deletes jobs or moves them between statuses adds what it changed here, in
-- its own transaction, grouped (counts.go): SQLite has one writer, so no
-- statement waits on a counter another holds. Triggers would have kept them
-- with no code, and cost a worker 22% of its burn-down rate: a trigger a job a
-- transition, where a claim or a completion of hundreds of jobs adds a row or
-- two.
--
-- Older Drover binaries do not keep the counts: every process that writes to
-- this database must run a version that knows migration 013, or the counts
-- drift from the jobs.
CREATE TABLE drover_job_counts (
    queue  TEXT    NOT NULL,
    status TEXT    NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (queue, status)
) WITHOUT ROWID;

-- The jobs there are now: the migration runs in a write transaction, so no
-- change falls between this count and the first statements that keep it.
INSERT INTO drover_job_counts (queue, status, n)
SELECT queue, status, COUNT(*) FROM drover_jobs GROUP BY queue, status;
