-- Every claim and every completion evaluates the job row's CHECKs, and a list
-- of text constants is compared one by one, in order: status_known compared a
-- running job's status with four constants and a succeeded one's with eight,
-- and lease_only_when_leased read its list twice. The same checks, with the
-- statuses a busy queue writes first and the lease check as one CASE, cost
-- about half as much (200k-row claim-like and completion-like UPDATEs, HOT:
-- 0.37 µs a job less of PostgreSQL's CPU, out of 0.7 for every check). The
-- rows are the same rows either way: status is NOT NULL, so the CASE says
-- what the OR said.
ALTER TABLE drover_jobs
    DROP CONSTRAINT drover_jobs_status_known,
    ADD CONSTRAINT drover_jobs_status_known CHECK (status IN (
        'running','succeeded','queued','claimed','pending','waiting','paused','stalled','failed','canceled','skipped')),
    DROP CONSTRAINT drover_jobs_lease_only_when_leased,
    ADD CONSTRAINT drover_jobs_lease_only_when_leased CHECK (CASE WHEN status IN ('running','claimed')
        THEN owner IS NOT NULL AND lease_token IS NOT NULL AND lease_expires_at IS NOT NULL
        ELSE owner IS NULL AND lease_token IS NULL AND lease_expires_at IS NULL END);
