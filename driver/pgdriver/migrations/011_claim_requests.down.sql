DROP TABLE IF EXISTS drover_claim_requests;
