package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// rawSQLiteSplit is an experiment, not a system of the harness: raw's loop on
// a job stored the way PostgreSQL's driver has stored it since its migration
// 006, taken further, to find what the bare writes of a layout that keeps
// Drover's guarantees could reach on SQLite against raw's narrow row.
//
//   - split_jobs holds what a job is (kind, queue, args, its options): the
//     insert writes it and a claim only reads it.
//   - split_claims is one row per claim: the owner, the lease token and the
//     expiry, which the reaper would find by its index (drover_leases).
//   - split_state is the hot row a transition rewrites: status, attempt, the
//     claim that holds the job (NULL unless claimed or running, a CHECK), and
//     when it started and finished, with the claim order's columns and the
//     claim index over its queued rows (a table of the claimable set, as
//     PostgreSQL's drover_ready, was slower here: deleting a claim's rows from
//     it took longer than the claim's update).
//   - split_finished is one row per statement that finished jobs, for
//     retention (drover_finished).
//
// The completion is fenced on its claim and attempt as Drover's is on (id,
// attempt, lease_token). No event is written, as drover-row writes none
// (Drover keeps a worker's in the job row), and no result: a success without
// one would write none here.
//
// Measured (thirty-fourth session, BenchmarkSQLiteRowWidth, six alternating
// triples): its bare writes reach 41–59% of narrow-row's rate (median 54%),
// drover-row's 28–44% (median 41%). Its bare writes plus what Drover's driver
// adds to its own row's (drover-driver against drover-row, in the same hour)
// came to about twice what half of narrow-row's rate leaves a job, so this
// layout would not bring Drover's SQLite driver to half of raw either.
// Under the harness's worker and the README run's knobs (split-sqlite,
// BenchmarkSQLiteSplitHarness, thirty-fifth session, six alternating rounds)
// raw's worker on this layout reached 46–65% of raw-sqlite (median 57%), on
// Drover's row 37–47% (median 43%); Drover's driver ran at 47–65% (median
// 50%) of raw's worker on its own row. bench/compare/HISTORY.md has the
// figures.
type rawSQLiteSplit struct {
	rawSQLite // its file, connection and wipe

	// held maps a claimed job's id to its attempt and claim. In the harness's
	// worker (BenchmarkSQLiteSplitHarness) the claim loop and the completer
	// use it from two goroutines.
	mu   sync.Mutex
	held map[int64][2]int64
}

func (r *rawSQLiteSplit) reset(ctx context.Context) error {
	if err := r.reopen(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.held = map[int64][2]int64{}
	r.mu.Unlock()
	_, err := r.db.ExecContext(ctx, `
		CREATE TABLE split_jobs (
		    id              INTEGER PRIMARY KEY AUTOINCREMENT,
		    kind            TEXT    NOT NULL,
		    queue           TEXT    NOT NULL,
		    args            TEXT    NOT NULL DEFAULT '{}',
		    metadata        TEXT,
		    priority        INTEGER NOT NULL DEFAULT 0,
		    run_at          INTEGER NOT NULL,
		    max_attempts    INTEGER NOT NULL,
		    timeout_ms      INTEGER NOT NULL DEFAULT 0,
		    idempotency_key TEXT,
		    created_at      INTEGER NOT NULL,
		    enqueued_by     TEXT,
		    retry_of        INTEGER,
		    workflow_run_id INTEGER,
		    workflow_node   TEXT,
		    CHECK (priority >= 0 AND max_attempts >= 1 AND timeout_ms >= 0));
		CREATE TABLE split_claims (
		    id         INTEGER PRIMARY KEY,
		    owner      TEXT    NOT NULL,
		    token      TEXT    NOT NULL,
		    expires_at INTEGER NOT NULL);
		CREATE INDEX split_claims_expires_idx ON split_claims (expires_at);
		CREATE TABLE split_state (
		    id          INTEGER PRIMARY KEY,
		    queue       TEXT    NOT NULL,
		    priority    INTEGER NOT NULL,
		    run_at      INTEGER NOT NULL,
		    status      TEXT    NOT NULL,
		    attempt     INTEGER NOT NULL DEFAULT 0,
		    claim_id    INTEGER,
		    started_at  INTEGER,
		    finished_at INTEGER,
		    rev         INTEGER NOT NULL DEFAULT 1,
		    CHECK (status = 'queued' OR status = 'running' OR status = 'succeeded' OR status = 'claimed' OR status = 'failed'),
		    CHECK ((claim_id IS NOT NULL) = (status = 'running' OR status = 'claimed')),
		    CHECK (attempt >= 0));
		CREATE INDEX split_state_claim_idx ON split_state (queue, priority, run_at, id) WHERE status = 'queued';
		CREATE TABLE split_finished (
		    id          INTEGER PRIMARY KEY,
		    finished_at INTEGER NOT NULL,
		    job_ids     TEXT    NOT NULL);
		CREATE INDEX split_finished_at_idx ON split_finished (finished_at)`)
	return err
}

// insert writes a job's two rows: what it is, and its state, which holds its
// place in claim order.
func (r *rawSQLiteSplit) insert(ctx context.Context, seqs []int64) error {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var b strings.Builder
	b.WriteString(`WITH p(now) AS (VALUES (?))
INSERT INTO split_jobs (kind, queue, args, priority, run_at, max_attempts, created_at, enqueued_by)
SELECT 'bench', 'default', v.column1, 0, p.now, 25, p.now, 'w' FROM (VALUES `)
	now := time.Now().UnixMicro()
	args := argsRows(&b, append(make([]any, 0, 1+len(seqs)), now), seqs)
	b.WriteString(") AS v, p RETURNING id")
	rows, err := tx.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return err
	}
	ids := make([]int64, 0, len(seqs))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return err
	}
	js := idsJSON(ids)
	if _, err := tx.ExecContext(ctx, `INSERT INTO split_state (id, queue, priority, run_at, status)
SELECT value, 'default', 0, ?, 'queued' FROM json_each(?)`, now, js); err != nil {
		return err
	}
	return tx.Commit()
}

// claim takes up to n jobs out of the claimable set, writes the claim's row
// and moves the jobs' state to running under it, and reads what each job is.
func (r *rawSQLiteSplit) claim(ctx context.Context, n int) ([]rawJob, error) {
	now := time.Now().UnixMicro()
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var claim int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO split_claims (owner, token, expires_at)
VALUES ('w', lower(hex(randomblob(16))), ?) RETURNING id`, now+30_000_000).Scan(&claim); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `UPDATE OR FAIL split_state
SET status = 'running', attempt = attempt + 1, claim_id = ?1, started_at = ?2, rev = rev + 2
WHERE id IN (SELECT id FROM split_state
             WHERE queue = 'default' AND status = 'queued' AND run_at <= ?2
             ORDER BY priority, run_at, id LIMIT ?3)
RETURNING id, attempt`, claim, now, n)
	if err != nil {
		return nil, err
	}
	attempts := make(map[int64]int64, n)
	ids := make([]int64, 0, n)
	for rows.Next() {
		var id, attempt int64
		if err := rows.Scan(&id, &attempt); err != nil {
			rows.Close()
			return nil, err
		}
		attempts[id] = attempt
		ids = append(ids, id)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil // rolls the claim's row back
	}
	rows, err = tx.QueryContext(ctx, `SELECT id, args FROM split_jobs WHERE id IN (SELECT value FROM json_each(?))`, idsJSON(ids))
	if err != nil {
		return nil, err
	}
	jobs, err := scanRawJobs(rows)
	rows.Close()
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	for _, j := range jobs {
		r.held[j.id] = [2]int64{attempts[j.id], claim}
	}
	r.mu.Unlock()
	return jobs, nil
}

// complete moves ids to succeeded, fenced on the attempt and the claim each
// was claimed under, and logs the statement's row for retention. It runs one
// UPDATE for each (attempt, claim) among ids: storeLoop completes each claim's
// jobs in batches of their own, so one, and the harness's completer mixes the
// jobs of the claims that finished last, usually one or two. One attempt and
// claim fence a statement as Drover's (id, attempt, lease_token) rows fence
// each job.
func (r *rawSQLiteSplit) complete(ctx context.Context, ids []int64) error {
	now := time.Now().UnixMicro()
	var fences [][2]int64
	byFence := map[[2]int64][]int64{}
	r.mu.Lock()
	for _, id := range ids {
		f, ok := r.held[id]
		if !ok {
			r.mu.Unlock()
			return fmt.Errorf("job %d: not held", id)
		}
		if byFence[f] == nil {
			fences = append(fences, f)
		}
		byFence[f] = append(byFence[f], id)
	}
	r.mu.Unlock()
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, f := range fences {
		group := byFence[f]
		res, err := tx.ExecContext(ctx, `UPDATE OR FAIL split_state
SET status = 'succeeded', claim_id = NULL, finished_at = ?1, rev = rev + 1
WHERE id IN (SELECT value FROM json_each(?2)) AND status = 'running' AND attempt = ?3 AND claim_id = ?4`,
			now, idsJSON(group), f[0], f[1])
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(group)) {
			return fmt.Errorf("completed %d of %d jobs of claim %d (%v)", n, len(group), f[1], err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO split_finished (finished_at, job_ids) VALUES (?, ?)`, now, idsJSON(ids)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	r.mu.Lock()
	for _, id := range ids {
		delete(r.held, id)
	}
	r.mu.Unlock()
	return nil
}

func (r *rawSQLiteSplit) unfinished(ctx context.Context) (int64, error) {
	var n int64
	err := r.db.QueryRowContext(ctx, "SELECT count(*) FROM split_state WHERE status <> 'succeeded'").Scan(&n)
	return n, err
}
