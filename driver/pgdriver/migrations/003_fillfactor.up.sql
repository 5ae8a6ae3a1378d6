-- A job row is written three times (insert, claim, completion) and a status
-- change is never a HOT update. Room on the page lets the new version stay next
-- to the old one: fewer pages dirtied and fewer full-page images per job.
ALTER TABLE drover_jobs SET (fillfactor = 80);
