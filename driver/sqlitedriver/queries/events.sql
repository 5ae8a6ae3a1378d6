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

-- name: EventInsertMany
-- Many events in one statement: :events is a JSON array of
-- [job_id, seq, type, from_status, to_status, at, actor, request_id, attempt].
INSERT INTO drover_job_events (job_id, seq, type, from_status, to_status, at, actor, request_id, attempt)
SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6, value->>7, value->>8
FROM json_each(:events);
