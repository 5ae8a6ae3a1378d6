DROP TABLE IF EXISTS drover_leader;
DROP TABLE IF EXISTS drover_queues;
DROP TABLE IF EXISTS drover_job_events;
DROP TABLE IF EXISTS drover_jobs;
