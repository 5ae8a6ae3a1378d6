ALTER TABLE drover_jobs RESET (fillfactor);
