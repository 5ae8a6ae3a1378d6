-- Back to one event row per claim: the claim events kept in job rows go back
-- into drover_job_events (in the compact form 008's down migration unfolds).
-- The lock first: a claim that committed after the copy's snapshot would lose
-- its events with the column, and an end of a claim the copy saw would write
-- them a second time.
LOCK TABLE drover_jobs IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
SELECT id, claim_seq, 'claimed', 'queued', 'running', started_at,
       CASE WHEN status = 'running' THEN 'worker:' || owner ELSE finished_by END, NULL, attempt
FROM drover_jobs
WHERE claim_seq IS NOT NULL
  AND (status = 'running' OR (status = 'succeeded' AND finished_by IS NOT NULL));
DROP TRIGGER drover_jobs_claim_event_out ON drover_jobs;
DROP FUNCTION drover_jobs_claim_event_out();
ALTER TABLE drover_jobs DROP COLUMN claim_seq;
