-- The lease token of the attempt a cancel ended, as pgdriver's migration 016:
-- a cancel clears the row's lease, and the heartbeat that answers the
-- canceled attempt's holder cancel_requested compares this instead, so that a
-- wrong token is refused (ErrLeaseLost) as at any other time.
ALTER TABLE drover_jobs ADD COLUMN cancel_token TEXT;
