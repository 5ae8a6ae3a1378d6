ALTER TABLE drover_jobs
    DROP CONSTRAINT drover_jobs_status_known,
    ADD CONSTRAINT drover_jobs_status_known CHECK (status IN (
        'pending','queued','claimed','running','waiting','paused','stalled','succeeded','failed','canceled','skipped')),
    DROP CONSTRAINT drover_jobs_lease_only_when_leased,
    ADD CONSTRAINT drover_jobs_lease_only_when_leased CHECK (
        (status IN ('claimed','running') AND owner IS NOT NULL AND lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)
        OR (status NOT IN ('claimed','running') AND owner IS NULL AND lease_token IS NULL AND lease_expires_at IS NULL));
