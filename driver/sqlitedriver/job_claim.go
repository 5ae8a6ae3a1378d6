package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// JobClaim moves up to Limit (default 1) claimable jobs of Queues to claimed
// under fresh leases, in claim order (priority, run_at, id); with ID set, only
// that job (whatever its queue) and only if it is claimable. It returns an empty
// slice, not an error, when nothing is claimable.
//
// SQLite has a single writer and the transaction begins IMMEDIATE, so selecting
// the candidates and updating them cannot interleave with another claimer, in
// this process or another: no SKIP LOCKED is needed.
func (d *Driver) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	if err := driver.CheckClaim(p); err != nil { // owner, request_id
		return nil, fmt.Errorf("claim: %w", err)
	}
	if p.LeaseDuration <= 0 {
		p.LeaseDuration = driver.DefaultLease // as pgdriver's claim and both heartbeats
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1
	}
	jobs := []*driver.Job{}
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		// Read once the write lock is held, as the reaper reads it: a claim
		// that waited for the lock (another process's write, the one write
		// connection's queue) was granted a lease counted from before the
		// wait, already expired if the wait passed it, and a reap right after
		// took the job back with an execution used, none run.
		now := clock(p.Now)
		expires := micros(now.Add(p.LeaseDuration))
		if p.RequestID != "" {
			replay, ok, err := claimReplay(ctx, tx, p)
			if err != nil || ok {
				jobs = replay
				return err
			}
		}
		if p.ReplayOnly {
			// No claim of the request_id: nothing to collect, and none may be
			// made (a sending of it still on its way would lease jobs to a
			// worker that has gone).
			return closeClaimRequest(ctx, tx, p, now)
		}
		cands, err := claimCandidates(ctx, tx, p, now, limit)
		if err != nil {
			return err
		}
		jobs, err = claimJobs(ctx, tx, p, cands, now, expires)
		if err == nil && len(jobs) > 0 && p.Abandoned != nil && p.Abandoned() {
			return errClaimAbandoned
		}
		return err
	})
	if errors.Is(err, errClaimAbandoned) {
		return []*driver.Job{}, nil
	}
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// errClaimAbandoned rolls back a claim whose caller is gone (ClaimParams.Abandoned).
var errClaimAbandoned = errors.New("claim abandoned by its caller")

// claimJobs claims cands in one UPDATE and logs their events in one INSERT (a
// chunk of each at a time), and returns the jobs in candidate (claim) order.
func claimJobs(ctx context.Context, tx *sql.Tx, p driver.ClaimParams, cands []candidate, now time.Time, expires int64) ([]*driver.Job, error) {
	if len(cands) == 0 {
		return []*driver.Job{}, nil
	}
	claims := make([]any, 0, 3*len(cands))
	tokens := make([]string, len(cands)) // by candidate
	for i, c := range cands {
		tokens[i] = uuid.NewString()
		claims = append(claims, c.id, c.status, tokens[i])
	}
	// keep: the claim's events stay in its queued jobs' rows (claim_seq,
	// migration 009); the others' go into drover_job_events.
	keep := p.Start && p.RequestID == ""
	claim := batchStmt{name: "ClaimJobs", cols: 3, scalars: []any{p.Owner, expires, p.Start, micros(now), keep}}
	claimed, err := claim.queryJobs(ctx, tx, claims)
	if err != nil {
		return nil, fmt.Errorf("claim %d jobs: %w", len(cands), err)
	}
	byID := make(map[int64]*driver.Job, len(claimed))
	for _, j := range claimed {
		byID[j.ID] = j
	}
	status, lease := lifecycle.StatusClaimed, fromMicros(expires)
	if p.Start {
		status = lifecycle.StatusRunning
	}
	jobs := make([]*driver.Job, 0, len(claimed))
	evs := make([]any, 0, 3*len(claimed))
	moved := counts{}
	for i, c := range cands {
		j := byID[c.id]
		if j == nil {
			continue // cannot happen under the write lock; skip rather than fail the batch
		}
		moved.move(j.Queue, lifecycle.Status(c.status), status)
		// What ClaimJobs set and so does not answer (queries/claim.sql).
		j.Status, j.Owner, j.LeaseToken = status, p.Owner, tokens[i]
		l := lease
		j.LeaseExpiresAt = &l
		t, ok := lifecycle.Lookup(lifecycle.OpClaim, lifecycle.Status(c.status), lifecycle.StatusClaimed)
		if !ok {
			return nil, fmt.Errorf("job %d: %w", j.ID, lifecycle.Check(lifecycle.OpClaim, lifecycle.Status(c.status), lifecycle.StatusClaimed))
		}
		jobs = append(jobs, j)
		if keep && c.status == string(lifecycle.StatusQueued) {
			continue // its row holds the events (ClaimJobs)
		}
		evs = append(evs, j.ID, c.status, string(t.Event))
	}
	if err := moved.write(ctx, tx); err != nil {
		return nil, fmt.Errorf("claim %d jobs: %w", len(jobs), err)
	}
	if len(evs) == 0 {
		return jobs, nil
	}
	events := batchStmt{name: "ClaimEvents", cols: 3,
		scalars: []any{p.Start, micros(now), leaseActor(p.Owner), nullString(p.RequestID)}}
	if err := events.exec(ctx, tx, evs); err != nil {
		if p.RequestID != "" && strings.Contains(err.Error(), "UNIQUE constraint failed: drover_job_events.job_id, drover_job_events.request_id") {
			return nil, driver.ClaimRequestInLog(p.RequestID)
		}
		return nil, fmt.Errorf("claim: append %d jobs' events: %w", len(jobs), err)
	}
	return jobs, nil
}

// claimReplay answers a repeated claim request: ok is true if requestID claimed
// jobs before, and jobs are those whose lease from that claim Owner still holds.
func claimReplay(ctx context.Context, tx *sql.Tx, p driver.ClaimParams) (jobs []*driver.Job, ok bool, err error) {
	var by string
	err = tx.QueryRowContext(ctx, queries.Get("ClaimRequestSeen"), sql.Named("request_id", p.RequestID)).Scan(&by)
	switch {
	case err == sql.ErrNoRows:
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("claim: look up request_id: %w", err)
	case by != leaseActor(p.Owner):
		return nil, false, driver.ClaimRequestReused(p.RequestID, by)
	}
	jobs, err = queryJobs(ctx, tx, queries.Get("ClaimReplay"), sql.Named("request_id", p.RequestID), sql.Named("owner", p.Owner))
	if err != nil {
		return nil, false, fmt.Errorf("claim: replay request_id: %w", err)
	}
	if jobs == nil {
		jobs = []*driver.Job{}
	}
	for _, j := range jobs {
		j.Replayed = true
	}
	return jobs, true, nil
}

// closeClaimRequest closes p.RequestID, of which no claim was made: a claim
// of it that runs later answers no jobs (ClaimRequestSeen).
func closeClaimRequest(ctx context.Context, tx *sql.Tx, p driver.ClaimParams, now time.Time) error {
	if _, err := tx.ExecContext(ctx, queries.Get("ClaimRequestsExpire"), sql.Named("before", micros(now.Add(-24*time.Hour)))); err != nil {
		return fmt.Errorf("claim: expire closed requests: %w", err)
	}
	if _, err := tx.ExecContext(ctx, queries.Get("ClaimRequestClose"), sql.Named("request_id", p.RequestID),
		sql.Named("actor", leaseActor(p.Owner)), sql.Named("now", micros(now))); err != nil {
		return fmt.Errorf("claim: close request %q: %w", p.RequestID, err)
	}
	return nil
}

// candidate is a claimable job found before the claim updates it.
type candidate struct {
	id       int64
	status   string
	priority int64
	runAt    int64
}

// claimCandidates returns up to limit claimable jobs in claim order. It asks
// each queue separately, so each query walks the claim index and stops at limit,
// and merges the answers.
func claimCandidates(ctx context.Context, tx *sql.Tx, p driver.ClaimParams, now time.Time, limit int) ([]candidate, error) {
	if p.ID != 0 {
		return scanCandidates(ctx, tx, queries.Get("ClaimCandidateByID"), sql.Named("id", p.ID), sql.Named("now", micros(now)))
	}
	var all []candidate
	seen := map[string]bool{}
	for _, q := range p.Queues {
		if seen[q] {
			continue
		}
		seen[q] = true
		cs, err := queueCandidates(ctx, tx, q, now, limit)
		if err != nil {
			return nil, err
		}
		all = append(all, cs...)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.priority != b.priority {
			return a.priority < b.priority
		}
		if a.runAt != b.runAt {
			return a.runAt < b.runAt
		}
		return a.id < b.id
	})
	if len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

// queueCandidates returns up to limit claimable jobs of queue in claim order
// (priority, run_at, id), a priority at a time (ClaimCandidatesInQueue says
// why). None if the queue is paused.
func queueCandidates(ctx context.Context, q querier, queue string, now time.Time, limit int) ([]candidate, error) {
	return scanCandidates(ctx, q, queries.Get("ClaimCandidatesInQueue"),
		sql.Named("queue", queue), sql.Named("now", micros(now)), sql.Named("limit", limit))
}

func scanCandidates(ctx context.Context, q querier, query string, args ...any) ([]candidate, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("claim: select jobs: %w", err)
	}
	defer rows.Close()
	var cs []candidate
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.id, &c.status, &c.priority, &c.runAt); err != nil {
			return nil, fmt.Errorf("claim: select jobs: %w", err)
		}
		cs = append(cs, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim: select jobs: %w", err)
	}
	return cs, nil
}
