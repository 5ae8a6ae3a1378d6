-- The per-job transition log. seq is the job's rev after the transition.

-- name: EventInsert
INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
VALUES (:job_id, :seq, :type, :from_status, :to_status, :at, :actor, :request_id, :attempt);

-- name: EventRequestSeen
SELECT EXISTS (SELECT 1 FROM drover_job_events WHERE request_id = :request_id AND job_id = :job_id);

-- name: EventList
SELECT job_id, seq, type, COALESCE(from_status, ''), to_status, at, actor, COALESCE(request_id, ''), attempt
FROM drover_job_events
WHERE job_id = :job_id
ORDER BY seq;
