ALTER TABLE drover_jobs DROP COLUMN cancel_token;
