-- Counts of jobs by queue and status, kept as the jobs change, so that GET
-- /queues and the drover_jobs gauge read a few rows instead of grouping every
-- job the retention keeps: at 1,000 jobs a second and 7 days of retention that
-- was 600M rows read on every call and every scrape.
--
-- Every statement that inserts or deletes jobs or moves them between statuses
-- appends what it changed to drover_job_count_changes, a row per queue and
-- status it changed: appends, so concurrent statements never wait for each other
-- on a counter's row, and the change commits or rolls back with the jobs. The
-- counts are drover_job_counts plus the changes (QueueCounts, one statement, one
-- snapshot); the leader folds the changes into drover_job_counts every second
-- (JobCountsFold), deleting them and adding them there in one statement.
--
-- Older Drover binaries do not write the changes: every process that writes to
-- this database must run a version that knows migration 017, or the counts
-- drift from the jobs (migration 006 asks the same).
CREATE TABLE drover_job_counts (
    queue  text   NOT NULL,
    status text   NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (queue, status)
);
CREATE TABLE drover_job_count_changes (
    queue  text   NOT NULL,
    status text   NOT NULL,
    n      bigint NOT NULL
);

-- The jobs there are now, counted while no one may change them: SHARE mode
-- lets reads on and holds every writer back until this migration commits (the
-- scan's time: 0.15 s for 1M jobs in memory on the development machine), so
-- no change falls between the count and the first statements that append
-- theirs.
LOCK TABLE drover_jobs IN SHARE MODE;
INSERT INTO drover_job_counts (queue, status, n)
SELECT queue, status, count(*) FROM drover_jobs GROUP BY queue, status;
