DROP TABLE drover_job_count_changes;
DROP TABLE drover_job_counts;
