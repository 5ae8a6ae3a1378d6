-- A claim writes one drover_leases row naming all its jobs, and a completion
-- batch one drover_finished row: 1,000 ids are an 8 kB array, which PostgreSQL
-- compressed with pglz before moving it out of line. The compression was most
-- of the insert (EXPLAIN ANALYZE: 0.35 of 0.5 ms for a claim of 1,000) and
-- saves nothing worth keeping: the rows live for a lease, or for retention at
-- 8 bytes a job beside a job row of hundreds. EXTERNAL stores them out of line
-- uncompressed; it changes how new values are stored, not the rows already there.
ALTER TABLE drover_leases ALTER COLUMN job_ids SET STORAGE EXTERNAL;
ALTER TABLE drover_finished ALTER COLUMN job_ids SET STORAGE EXTERNAL;
