-- Claim request_ids a worker closed without a claim. A worker that stops while
-- its claim is under way collects it (ClaimParams.ReplayOnly): if no claim of
-- its request_id was made, the request_id is closed here, so that a sending of
-- it still on its way or waiting in a long poll (a proxy that passes on the
-- worker's disconnect late, or never) claims nothing when it runs: its jobs
-- would be leased to a worker that has gone. ClaimSeen reads these rows as it
-- reads a claim's event, and a claim of a closed request_id answers none.
-- Rows go a day after they were written (a claim lives a long poll and a lease).
CREATE TABLE drover_claim_requests (
    request_id text        PRIMARY KEY,
    actor      text        NOT NULL,
    closed_at  timestamptz NOT NULL
);
CREATE INDEX drover_claim_requests_closed_idx ON drover_claim_requests (closed_at);
