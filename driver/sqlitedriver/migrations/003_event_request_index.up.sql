-- The request_id index was keyed (request_id, job_id). Every completion carries a
-- fresh random request_id, so each insert landed on a random leaf page of a
-- growing index: a page read and a dirty page written to the WAL per job (a
-- completion batch of 500 wrote ~850 pages). Keyed by job first, inserts follow
-- the job ids and stay at the right edge; the lookups (EventRequestSeen and the
-- batch guards) name the job anyway. Only a claim's request_id is looked up
-- alone (ClaimRequestSeen, ClaimReplay): a small partial index serves it.
-- pgdriver's migration 004 made the same change.
CREATE UNIQUE INDEX drover_job_events_job_request_idx ON drover_job_events (job_id, request_id) WHERE request_id IS NOT NULL;
CREATE INDEX drover_job_events_claim_request_idx ON drover_job_events (request_id) WHERE request_id IS NOT NULL AND type = 'claimed';
DROP INDEX drover_job_events_request_idx;
