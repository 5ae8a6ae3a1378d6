DROP TABLE drover_job_counts;
