-- The leadership lease row names the Run of the engine that took it, not only
-- its id: the election extended (and a resign deleted) a lease held under the
-- same leader_id, so two engines given one id (a hostname, a copied config)
-- both led. Each Run now takes a random token; only the holder of the row's
-- id and token extends or resigns it, and another Run of that id waits for it
-- to be free or expired. A row an older binary wrote has the empty token,
-- which no new engine's token is, so it is taken only once free or expired;
-- an older binary's election leaves the token as it was and matches on the id
-- alone, as before.
ALTER TABLE drover_leader ADD COLUMN token TEXT NOT NULL DEFAULT '';
