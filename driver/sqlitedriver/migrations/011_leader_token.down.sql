ALTER TABLE drover_leader DROP COLUMN token;
