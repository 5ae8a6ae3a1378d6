-- Back to migration 012's trigger (its function, verbatim) in place of the check.
ALTER TABLE drover_jobs DROP CONSTRAINT drover_jobs_claim_seq_live;

CREATE FUNCTION drover_jobs_claim_event_out() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
    VALUES (OLD.id, OLD.claim_seq, 'claimed', 'queued', 'running', OLD.started_at,
            CASE WHEN OLD.status = 'running' THEN 'worker:' || OLD.owner ELSE OLD.finished_by END,
            NULL, OLD.attempt);
    NEW.claim_seq := NULL;
    RETURN NEW;
END
$$;

CREATE TRIGGER drover_jobs_claim_event_out
BEFORE UPDATE OF status, finished_by, claim_seq ON drover_jobs
FOR EACH ROW
WHEN (OLD.claim_seq IS NOT NULL
      AND (OLD.status = 'running' OR (OLD.status = 'succeeded' AND OLD.finished_by IS NOT NULL))
      AND NOT (NEW.claim_seq IS NOT DISTINCT FROM OLD.claim_seq
               AND (NEW.status = 'running' OR (NEW.status = 'succeeded' AND NEW.finished_by IS NOT NULL))))
EXECUTE FUNCTION drover_jobs_claim_event_out();
