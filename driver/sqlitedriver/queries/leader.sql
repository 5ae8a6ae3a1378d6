-- Leadership is one lease row. A single upsert takes the row when it is absent or
-- expired and extends it when the caller holds it (its id and its Run's token:
-- another engine of the same id has another); RETURNING says who leads.

-- name: LeaderAttemptElect
INSERT INTO drover_leader (name, leader_id, token, elected_at, expires_at)
VALUES ('default', :leader_id, :token, :now, :expires_at)
ON CONFLICT (name) DO UPDATE
SET leader_id = excluded.leader_id,
    token = excluded.token,
    elected_at = CASE WHEN drover_leader.leader_id = excluded.leader_id AND drover_leader.token = excluded.token
        THEN drover_leader.elected_at ELSE excluded.elected_at END,
    expires_at = excluded.expires_at
WHERE (drover_leader.leader_id = excluded.leader_id AND drover_leader.token = excluded.token)
   OR drover_leader.expires_at < excluded.elected_at
RETURNING leader_id, token;

-- name: LeaderResign
DELETE FROM drover_leader WHERE name = 'default' AND leader_id = :leader_id AND token = :token;

-- name: LeaderGet
SELECT leader_id, expires_at FROM drover_leader WHERE name = 'default';
