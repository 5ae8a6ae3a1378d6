package pgdriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// defaultLease applies when a caller passes no lease duration (a claim's or
// a heartbeat's), on both drivers.
const defaultLease = driver.DefaultLease

func leaseOr(d time.Duration) time.Duration {
	if d <= 0 {
		return defaultLease
	}
	return d
}

// JobClaim implements driver.Driver.
func (d *Driver) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	if err := driver.CheckClaim(p); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if p.RequestID == "" {
		if p.Abandoned != nil {
			return d.claimInTx(ctx, d.pool, p)
		}
		return d.claim(ctx, d.pool, p)
	}
	// A repeat must find the first call's claim, even while that call runs: the
	// check and the claim hold a session lock on the request id, on the one
	// connection that runs both, so a second call waits until the first has
	// committed and then replays it.
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, hashtext($2))", claimRequestLock, p.RequestID); err != nil {
		// Interrupted (say by ctx), the lock may still have been granted: end
		// the session rather than hand the pool a connection that holds it.
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("claim: lock request %q: %w", p.RequestID, err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1, hashtext($2))", claimRequestLock, p.RequestID); err != nil {
			_ = conn.Conn().Close(ctx) // ending the session releases the lock
		}
	}()
	var by string
	err = conn.QueryRow(ctx, queries.Get("ClaimSeen"), p.RequestID).Scan(&by)
	switch {
	case isNoRows(err):
	case err != nil:
		return nil, fmt.Errorf("claim: %w", err)
	case by != "worker:"+p.Owner:
		return nil, driver.ClaimRequestReused(p.RequestID, by)
	default:
		rows, err := conn.Query(ctx, queries.Get("ClaimReplay"), p.RequestID, p.Owner)
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		jobs, err := collectJobs(rows)
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		for _, j := range jobs {
			j.Replayed = true
		}
		return jobs, nil
	}
	if p.ReplayOnly {
		// No claim of the request_id: nothing to collect, and none may be
		// made (a sending of it still on its way would lease jobs to a
		// worker that has gone).
		if _, err := conn.Exec(ctx, queries.Get("ClaimClose"), p.RequestID, "worker:"+p.Owner); err != nil {
			return nil, fmt.Errorf("claim: close request %q: %w", p.RequestID, err)
		}
		return []*driver.Job{}, nil
	}
	var jobs []*driver.Job
	if p.Abandoned != nil {
		jobs, err = d.claimInTx(ctx, conn, p)
	} else {
		jobs, err = d.claim(ctx, conn, p)
	}
	if isRequestRepeat(err) {
		return nil, driver.ClaimRequestInLog(p.RequestID)
	}
	return jobs, err
}

// claimInTx is claim in a transaction of its own, rolled back if
// p.Abandoned says the caller is gone once the jobs are taken (on the
// request's connection, while it holds the request's lock: a resend waiting
// for the lock then finds nothing claimed). A claim of several rounds that
// fails in a later one rolls back whole.
func (d *Driver) claimInTx(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, p driver.ClaimParams) ([]*driver.Job, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after a commit, a no-op
	jobs, err := d.claim(ctx, tx, p)
	if err != nil {
		return nil, err
	}
	if len(jobs) > 0 && p.Abandoned() {
		return []*driver.Job{}, nil // rolled back by the deferred call
	}
	// The COMMIT is not canceled with ctx: canceled once it was under way,
	// it could commit while the call reported the cancel, the jobs then
	// leased to a caller that was told nothing was claimed. Past this point
	// the caller learns what was claimed, and gives back what it cannot use.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitBound)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return jobs, nil
}

// commitBound bounds a claim's COMMIT, which its caller's context does not.
const commitBound = 10 * time.Second

// claimRequestLock is the first key of the advisory locks JobClaim takes on
// request ids ('dcl' in ASCII), so they share no key with other locks.
const claimRequestLock = 0x64636c

// claimDB runs a claim's statements: the pool, or the connection holding the
// request's lock.
type claimDB interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// claim is JobClaim once the request is known to be new.
func (d *Driver) claim(ctx context.Context, q claimDB, p driver.ClaimParams) ([]*driver.Job, error) {
	lease := micros(leaseOr(p.LeaseDuration))
	if p.ID == 0 {
		limit := p.Limit
		if limit <= 0 {
			limit = 1
		}
		if len(p.Queues) != 1 {
			return d.claimQueues(ctx, q, p, limit, lease)
		}
		return d.claimQueue(ctx, q, p, limit, lease)
	}
	return d.claimByIDs(ctx, q, []int64{p.ID}, p, lease)
}

// claimByIDs claims the jobs of ids that are still claimable, under SKIP LOCKED,
// in one batch after the lock of their queues (claimLock): those of p.Queues,
// or, for a claim by id, the job's. Planned with its values on each call
// (force_custom_plan): a generic plan built while the table is small would scan
// it sequentially.
func (d *Driver) claimByIDs(ctx context.Context, q claimDB, ids []int64, p driver.ClaimParams, lease int64) ([]*driver.Job, error) {
	lock := claimLock(p.Queues)
	if p.ID != 0 {
		lock = stmt{queries.Get("ClaimLockJobQueues"), []any{queuePauseLock, ids}}
	}
	var jobs []*driver.Job
	err := queryAfter(ctx, q, []stmt{{sql: claimByIDSettings}, lock}, queries.Get("JobClaimByID"), func(rows pgx.Rows) (err error) {
		jobs, err = collectJobs(rows)
		return err
	}, ids, p.Owner, lease, nowArg(p.Now), p.RequestID, p.Start)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return jobs, nil
}

// claimByIDSettings plan JobClaimByID with its values on every call, as
// QueryExecModeExec did before it ran in a batch (which uses the pool's
// statement cache).
const claimByIDSettings = `SELECT set_config('plan_cache_mode', 'force_custom_plan', true)`

// queuePauseLock is the first key of the advisory locks on queue names ('dqp'
// in ASCII; the second is hashtext(queue)). Every claim holds the locks of its
// queues shared from its first statement until it commits (ClaimLockQueues);
// QueuePause takes the queue's exclusively before it writes, so it returns
// only once the claims that may have read the queue unpaused have committed,
// and no job of a paused queue is claimed after QueuePause returns. It costs a
// claim one statement more in the batch it already sends (no round trip) and
// one shared lock in the lock manager.
const queuePauseLock = 0x647170

// stmt is one statement of a batch.
type stmt struct {
	sql  string
	args []any
}

// claimLock is a claim's first statement: the locks of queues.
func claimLock(queues []string) stmt {
	return stmt{queries.Get("ClaimLockQueues"), []any{queuePauseLock, queues}}
}

// claimPlanSettings hold for the one transaction that runs a single-queue
// claim. Planned with its values on every call, the claim's parse and plan took
// ~0.8 ms of CPU of a ~1 ms claim of one job; at 1,000 jobs/s that CPU was what a
// job waited for between enqueue and start. Prepared (pgx caches it per
// connection) and under force_generic_plan it is planned once. A generic plan
// was a trap before: built while a table is small, it scans it sequentially and
// keeps doing so at millions of rows. With enable_seqscan off the claim's scans
// of drover_jobs are index scans whatever the table's size
// (TestClaimPlanUsesIndexesOnATinyTable), and the statement's shape (a skip
// scan per priority, a range per priority bounded by run_at) does not depend on
// the values. Bitmap scans are off too: an ANALYZE of drover_ready while the
// queue is drained leaves statistics of no rows, and every session then plans
// the claim again; on them it read drover_ready by bitmap heap scans and sorted
// every ready job for each LIMIT: a claim of 160 ms instead of 12, caught in a
// continuous run whose rate halved from one ANALYZE to the next
// (TestClaimPlanWalksTheKeyAfterADrainedQueueWasAnalyzed). jit stays off: a
// claim never repays a compile. PostgreSQL reads plan_cache_mode when the claim
// is bound, and builds or rebuilds the plan then, so a setting local to the
// transaction is enough; it ends with it.
const claimPlanSettings = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
       set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('jit', 'off', true)`

// claimQueue claims up to limit jobs of one queue. It starts at the queue's
// claim cursor when it has one (claimCursors); when that claim comes back
// short, jobs may wait behind the cursor, and the rest of the limit is asked
// for again from the start at once.
func (d *Driver) claimQueue(ctx context.Context, q claimDB, p driver.ClaimParams, limit int, lease int64) ([]*driver.Job, error) {
	queue, now := p.Queues[0], time.Now()
	if p.Now != nil {
		now = *p.Now
	}
	cur := d.cursors.get(queue, now)
	scanned := now
	if cur != nil {
		scanned = cur.scanned
	}
	jobs, err := d.claimQueueFrom(ctx, q, p, limit, lease, cur)
	if err != nil {
		d.cursors.forget(queue)
		return nil, err
	}
	if cur != nil && len(jobs) < limit {
		more, err := d.claimQueueFrom(ctx, q, p, limit-len(jobs), lease, nil)
		if err != nil {
			d.cursors.forget(queue)
			if len(jobs) == 0 {
				return nil, err
			}
			d.log.Warn("claim: asking again from the start of the queue failed; answering the jobs already claimed",
				"claimed", len(jobs), "err", err)
			return jobs, nil
		}
		// more is in claim order. Taking all it asked for, it may have left
		// jobs behind the cursor: the next claim starts past the last job
		// more took, so that the rest go before the jobs past the old
		// cursor. Set past the end of jobs, a pile behind the cursor drained
		// by each claim's shortfall only, each claim marking the queue
		// scanned, and the cursor never reset.
		topped := len(more) == limit-len(jobs) && len(more) > 0
		jobs = append(jobs, more...)
		sortClaimOrder(jobs)
		scanned = now
		if topped {
			d.cursors.update(queue, scanned, len(jobs), limit, more[len(more)-1])
			return jobs, nil
		}
	}
	var last *driver.Job
	if len(jobs) > 0 {
		last = jobs[len(jobs)-1]
	}
	d.cursors.update(queue, scanned, len(jobs), limit, last)
	return jobs, nil
}

// claimQueueFrom runs one single-queue claim, past cur unless it is nil. The
// settings and the claim go in one batch: one round trip and one implicit
// transaction, which commits when the batch closes, so a commit's error is the
// claim's.
func (d *Driver) claimQueueFrom(ctx context.Context, q claimDB, p driver.ClaimParams, limit int, lease int64, cur *claimCursor) ([]*driver.Job, error) {
	curPrio, curRunAt, curID := cur.args()
	var jobs []*driver.Job
	pre := []stmt{{sql: claimPlanSettings}, claimLock(p.Queues[:1])}
	err := queryAfter(ctx, q, pre, queries.Get("JobClaimQueue"), func(rows pgx.Rows) (err error) {
		jobs, err = collectJobs(rows)
		return err
	}, p.Queues[0], limit, p.Owner, lease, nowArg(p.Now), p.RequestID, p.Start, curPrio, curRunAt, curID)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	sortClaimOrder(jobs) // the statement answers them unsorted
	return jobs, nil
}

// queryUnder runs query after settings in one transaction, a pgx batch (one
// round trip, one implicit transaction, so set_config(…, true) holds for the
// query and ends with it), and hands its rows to read, which closes them.
func queryUnder(ctx context.Context, q claimDB, settings, query string, read func(pgx.Rows) error, args ...any) error {
	return queryAfter(ctx, q, []stmt{{sql: settings}}, query, read, args...)
}

// queryAfter is queryUnder with the statements pre before query.
func queryAfter(ctx context.Context, q claimDB, pre []stmt, query string, read func(pgx.Rows) error, args ...any) error {
	b := &pgx.Batch{}
	for _, s := range pre {
		b.Queue(s.sql, s.args...)
	}
	b.Queue(query, args...)
	br := q.SendBatch(ctx, b)
	var err error
	for range pre {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			err = read(rows)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// claimRounds bounds how often a claim naming several queues asks again for
// candidates past those another claimer took or holds.
const claimRounds = 3

// claimQueues claims up to limit jobs of several queues: their first
// candidates, merged in claim order, are claimed by id under SKIP LOCKED (the
// claim checks each again). A candidate another claimer took or holds between
// the read and the lock is skipped, and the claim asks again past the skipped
// ones, up to claimRounds times, so a contended claim still fills its limit
// while jobs are ready. Each round commits on its own: once a round has claimed
// jobs, a later round's error ends the claim with the jobs already held (they
// are leased to p.Owner, and the caller must run them).
func (d *Driver) claimQueues(ctx context.Context, q claimDB, p driver.ClaimParams, limit int, lease int64) ([]*driver.Job, error) {
	out := []*driver.Job{}
	skipped := map[int64]bool{}
	for round := 0; round < claimRounds && len(out) < limit; round++ {
		ids, err := d.claimCandidates(ctx, q, p.Queues, limit-len(out), skipped, p.Now)
		if err == nil && len(ids) == 0 {
			break
		}
		var jobs []*driver.Job
		if err == nil {
			jobs, err = d.claimByIDs(ctx, q, ids, p, lease)
		}
		if err != nil {
			if _, inTx := q.(pgx.Tx); len(out) > 0 && !inTx {
				d.log.Warn("claim: asking again past taken candidates failed; answering the jobs already claimed",
					"claimed", len(out), "err", err)
				break
			}
			return nil, err // in a transaction (claimInTx), the failure aborted it: nothing is claimed
		}
		out = append(out, jobs...)
		if len(jobs) == len(ids) {
			break // every candidate was claimed: there were no more, or the limit is reached
		}
		got := make(map[int64]bool, len(jobs))
		for _, j := range jobs {
			got[j.ID] = true
		}
		for _, id := range ids {
			if !got[id] {
				skipped[id] = true
			}
		}
	}
	sortClaimOrder(out)
	return out, nil
}

// sortClaimOrder sorts jobs in claim order; jobs already in it (the common
// case) are only read.
func sortClaimOrder(jobs []*driver.Job) {
	order := func(a, b *driver.Job) int {
		return claimOrder(a.Priority, a.RunAt, a.ID, b.Priority, b.RunAt, b.ID)
	}
	if !slices.IsSortedFunc(jobs, order) {
		slices.SortFunc(jobs, order)
	}
}

// claimOrder compares job a with job b in claim order (negative: a is
// claimed first): smaller priority, then earlier run_at, then smaller id.
func claimOrder(pa int, ra time.Time, ia int64, pb int, rb time.Time, ib int64) int {
	if c := cmp.Compare(pa, pb); c != 0 {
		return c
	}
	if c := ra.Compare(rb); c != 0 {
		return c
	}
	return cmp.Compare(ia, ib)
}

// claimCandidates returns the ids of the first limit claimable jobs of queues
// not in skip, in claim order: each queue is asked for its first limit+len(skip)
// (a walk of its part of drover_ready's key that stops there), and the answers are
// merged. They are read without locks; the claim locks them and checks each again.
func (d *Driver) claimCandidates(ctx context.Context, db claimDB, queues []string, limit int, skip map[int64]bool, now *time.Time) ([]int64, error) {
	type cand struct {
		id       int64
		priority int32
		runAt    time.Time
	}
	var all []cand
	seen := make(map[string]bool, len(queues))
	for _, q := range queues {
		if seen[q] {
			continue
		}
		seen[q] = true
		rows, err := db.Query(ctx, queries.Get("ClaimCandidatesInQueue"), pgx.QueryExecModeExec, q, limit+len(skip), nowArg(now))
		if err != nil {
			return nil, fmt.Errorf("claim: candidates of queue %q: %w", q, err)
		}
		var c cand
		_, err = pgx.ForEachRow(rows, []any{&c.id, &c.priority, &c.runAt}, func() error {
			if !skip[c.id] {
				all = append(all, c)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("claim: candidates of queue %q: %w", q, err)
		}
	}
	slices.SortFunc(all, func(a, b cand) int {
		return claimOrder(int(a.priority), a.runAt, a.id, int(b.priority), b.runAt, b.id)
	})
	ids := make([]int64, 0, min(limit, len(all)))
	for _, c := range all[:min(limit, len(all))] {
		ids = append(ids, c.id)
	}
	return ids, nil
}

// JobStart implements driver.Driver.
func (d *Driver) JobStart(ctx context.Context, p driver.FenceParams) (*driver.Job, error) {
	return d.fenced(ctx, d.pool, callOf("start"), p, driver.ErrLeaseLost, "JobStart",
		p.ID, p.Attempt, driver.CanonicalToken(p.LeaseToken), p.RequestID, nowArg(p.Now), micros(p.LeaseDuration))
}

// JobUnclaim implements driver.Driver.
func (d *Driver) JobUnclaim(ctx context.Context, p driver.FenceParams) (*driver.Job, error) {
	j, err := d.fenced(ctx, d.pool, callOf("unclaim"), p, driver.ErrLeaseLost, "JobUnclaim",
		p.ID, p.Attempt, driver.CanonicalToken(p.LeaseToken), p.RequestID, nowArg(p.Now))
	if err == nil && !j.Replayed {
		_ = d.WakeupPublish(ctx, []string{j.Queue})
	}
	return j, err
}

// JobHeartbeat implements driver.Driver. A heartbeat extends the lease and bumps
// rev; it is logged only when it carries a request_id, because that log entry is
// what makes a repeat recognisable. It never moves the lease's end earlier (see
// driver.Driver), so the drover_leases row of the claim, or of a start that
// shortened the claim's lease, still comes due no later than the lease. A
// running job with a timeout is never leased past
// started_at + timeout + one lease: a worker that runs it on past its timeout
// (one that ignores timeout_seconds) heartbeats in vain, and the reaper ends the
// attempt, the engine's side of a timeout.
func (d *Driver) JobHeartbeat(ctx context.Context, p driver.HeartbeatParams) (driver.HeartbeatResult, error) {
	if err := driver.CheckRequestID(p.RequestID); err != nil {
		return driver.HeartbeatResult{}, fmt.Errorf("heartbeat job %d: %w", p.ID, err)
	}
	if p.RequestID != "" {
		if j, err := d.replay(ctx, d.pool, callOf("heartbeat"), p.ID, p.RequestID, p.Attempt); err != nil || j != nil {
			if err != nil {
				return driver.HeartbeatResult{}, fmt.Errorf("heartbeat job %d: %w", p.ID, err)
			}
			return d.heartbeatReplay(ctx, j, p.FenceParams)
		}
	}
	j, err := d.fenced(ctx, d.pool, callOf("heartbeat"), p.FenceParams, driver.ErrLeaseLost, "JobHeartbeat",
		p.ID, p.Attempt, driver.CanonicalToken(p.LeaseToken), p.RequestID, nowArg(p.Now), micros(leaseOr(p.LeaseDuration)))
	if errors.Is(err, driver.ErrLeaseLost) {
		// Canceled during this attempt, under this token: tell the holder to
		// stop rather than that it lost. Any other token is a stale fence.
		// A read that fails says neither: the heartbeat failed, and the
		// worker tries it again. Answered lease lost, the holder of a
		// canceled job (whose heartbeat's deadline, an interval, ran out
		// between the two reads) counted a lost lease, which an operator
		// alerts on, for a cancel.
		held, herr := d.canceledHolder(ctx, p.FenceParams)
		if herr != nil {
			return driver.HeartbeatResult{}, fmt.Errorf("heartbeat job %d: read whether this holder's attempt was canceled: %w", p.ID, herr)
		}
		if held {
			return driver.HeartbeatResult{CancelRequested: true}, nil
		}
	}
	if err != nil {
		return driver.HeartbeatResult{}, err
	}
	if j.Replayed { // a repeat that ran beside its first call (see fenced)
		return d.heartbeatReplay(ctx, j, p.FenceParams)
	}
	return heartbeatAnswer(j, p.Attempt), nil
}

// canceledHolder reports whether f's job was canceled during f's attempt
// while f's lease token held it (the token the cancel cleared, kept in
// cancel_token: migration 016).
func (d *Driver) canceledHolder(ctx context.Context, f driver.FenceParams) (bool, error) {
	if _, err := uuid.Parse(f.LeaseToken); err != nil || !attemptFits(f.Attempt) {
		return false, nil // no token a claim issued, or no attempt one handed out
	}
	var held bool
	err := d.pool.QueryRow(ctx, queries.Get("JobCanceledHolder"), f.ID, f.Attempt, driver.CanonicalToken(f.LeaseToken)).Scan(&held)
	return held, err
}

// heartbeatReplay answers a repeated heartbeat (driver.HeartbeatReplay): a
// job canceled at the fence's attempt answers cancel requested only to the
// token the cancel cleared; a repeat of another token's request_id is lease
// lost, as it is while the job is leased.
func (d *Driver) heartbeatReplay(ctx context.Context, j *driver.Job, f driver.FenceParams) (driver.HeartbeatResult, error) {
	if j.Status == lifecycle.StatusCanceled && j.Attempt == f.Attempt {
		held, err := d.canceledHolder(ctx, f)
		if err != nil {
			return driver.HeartbeatResult{}, fmt.Errorf("heartbeat job %d: %w", j.ID, err)
		}
		if !held {
			return driver.HeartbeatResult{}, driver.Refused("heartbeat", j.ID, j.Status, j.Attempt, driver.ErrLeaseLost)
		}
	}
	return driver.HeartbeatReplay(j, f)
}

func heartbeatAnswer(j *driver.Job, attempt int) driver.HeartbeatResult {
	r := driver.HeartbeatResult{CancelRequested: j.Status == lifecycle.StatusCanceled && j.Attempt == attempt}
	if j.LeaseExpiresAt != nil {
		r.LeaseExpiresAt = *j.LeaseExpiresAt
	}
	return r
}

// JobComplete implements driver.Driver.
func (d *Driver) JobComplete(ctx context.Context, p driver.CompleteParams) (*driver.Job, error) {
	if err := driver.CheckResult(p.Result); err != nil {
		return nil, fmt.Errorf("complete job %d: %w", p.ID, err)
	}
	return d.fenced(ctx, d.pool, callOf("complete"), p.FenceParams, driver.ErrLeaseLost, "JobComplete", completeArgs(p)...)
}

func completeArgs(p driver.CompleteParams) []any {
	return []any{p.ID, p.Attempt, driver.CanonicalToken(p.LeaseToken), p.RequestID, nowArg(p.Now), resultText(p.Result)}
}

// resultText is a completion's result as the statements take it: JSON null
// for none.
func resultText(r []byte) string {
	if len(r) == 0 {
		return "null"
	}
	return string(r)
}

// JobCompleteMany implements driver.Driver: one transaction, one round trip for
// the statements, each fenced on its own.
func (d *Driver) JobCompleteMany(ctx context.Context, params []driver.CompleteParams) []driver.JobOutcome {
	return d.completeMany(ctx, params, false)
}

// JobCompleteManyErrs implements driver.Driver: JobCompleteMany's statement
// answers only the input positions that completed, not their rows.
func (d *Driver) JobCompleteManyErrs(ctx context.Context, params []driver.CompleteParams) []error {
	return driver.OutcomeErrs(d.completeMany(ctx, params, true))
}

// completeManyOrds is JobCompleteMany answering only the ord of each job it
// completed. Its UPDATE returns only what gone, fin, counted and the answer read:
// every column of 500 rows, copied into the CTE's tuplestore for nothing,
// was ~0.65 µs a job of PostgreSQL's time, ~7% of the statement (alternating
// EXECUTEs of both forms on 200k running jobs, batches of 500, medians 4.84
// / 4.99 against 4.52 / 4.64 ms).
var completeManyOrds = replaceOnce(queryVariant("JobCompleteMany", "SELECT * FROM j;", "SELECT ord FROM j;"),
	"RETURNING drover_jobs.*, input.request_id AS req, input.ord AS ord",
	"RETURNING drover_jobs.id, drover_jobs.rev, drover_jobs.finished_at, drover_jobs.started_at, drover_jobs.attempt,\n"+
		"        drover_jobs.queue, drover_jobs.status,\n"+
		"        input.request_id AS req, input.ord AS ord")

// completePlanSettings hold for the one transaction of a batch completion. The
// statement should look each job up by primary key. Its guard names status =
// 'running', and statistics gathered while few jobs were leased (an ANALYZE of
// an idle queue) made drover_jobs look nearly empty: on a table of 20k jobs the
// planner put it on the outer side of a nested loop and walked all of it, by a
// sequential scan or by the whole primary key, comparing every job with every
// input row (80-130 ms for 500 completions instead of 2.5-4). The statement
// names its ids for an index lookup (id = ANY), and with sequential scans and
// nested loops off that lookup feeds a hash join with the input whatever the
// statistics say (TestCompletionPlanIgnoresStaleLeaseStatistics); on 200k jobs
// with fresh statistics it is as fast as the nested loop the planner picked.
//
// With no other shape left to choose, the plan no longer depends on the
// values or the statistics, so it is built once per connection
// (force_generic_plan), as the claim's is. Planned with its values on every
// call, the completion spent 0.6-0.9 ms of PostgreSQL's CPU planning each
// batch, more than executing one of a few jobs: at 1,000 jobs/s (batches of
// ~5) 2.6 s of planning in 15 s against 1.1 s of execution, and in a burn-down
// (batches of ~400) 1.5 µs a job (pg_stat_statements, bench/compare/HISTORY.md,
// thirty-sixth session).
const completePlanSettings = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
       set_config('enable_seqscan', 'off', true), set_config('enable_nestloop', 'off', true),
       set_config('jit', 'off', true)`

// repeatMention marks, in completeMany, a later mention of a job the batch
// statement names: it runs on its own after the statement.
const repeatMention = -1

// completeMany applies the completions; with idsOnly the outcomes of the jobs
// the batch statement completed carry no job.
func (d *Driver) completeMany(ctx context.Context, params []driver.CompleteParams, idsOnly bool) []driver.JobOutcome {
	out := make([]driver.JobOutcome, len(params))
	n := len(params)
	ids, attempts, tokens := make(binArray[pgtype.Int8], 0, n), make(binArray[pgtype.Int4], 0, n), make(binArray[pgtype.UUID], 0, n)
	results, reqs := make(binArray[pgtype.Text], 0, n), make(binArray[pgtype.Text], 0, n)
	// input position → ordinal in the statement (1-based); 0: not sent;
	// repeatMention: a later mention of a job the statement names
	sent := make([]int64, n)
	var now *time.Time
	// Sent in id order, so concurrent batches take row locks in one order, and
	// each job once: a later mention of a job (next to its first, in this
	// order) runs on its own after the statement, in input order, as SQLite's
	// batch does.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(params[a].ID, params[b].ID) })
	named, last := false, int64(0) // the id last sent
	for _, i := range order {
		p := params[i]
		if err := driver.CheckResult(p.Result); err != nil {
			out[i].Err = fmt.Errorf("complete job %d: %w", p.ID, err)
			continue // refused alone; the rest of the batch goes on
		}
		if err := driver.CheckRequestID(p.RequestID); err != nil {
			// Refused alone: PostgreSQL refuses a NUL in text, and the
			// statement that sent it would fail the whole batch.
			out[i].Err = fmt.Errorf("complete job %d: %w", p.ID, err)
			continue
		}
		token, err := uuid.Parse(p.LeaseToken)
		if err != nil || !attemptFits(p.Attempt) {
			// Diagnosed below: a malformed token never reaches the uuid cast,
			// and an attempt past int4 is no job's (int32 would wrap it onto one).
			continue
		}
		if named && last == p.ID {
			sent[i] = repeatMention // run on its own below
			continue
		}
		named, last = true, p.ID
		sent[i] = int64(len(ids) + 1)
		ids = append(ids, pgtype.Int8{Int64: p.ID, Valid: true})
		attempts = append(attempts, pgtype.Int4{Int32: int32(p.Attempt), Valid: true})
		tokens = append(tokens, pgtype.UUID{Bytes: token, Valid: true})
		results = append(results, pgtype.Text{String: resultText(p.Result), Valid: true})
		reqs = append(reqs, pgtype.Text{String: p.RequestID, Valid: true})
		if p.Now != nil {
			now = p.Now
		}
	}
	// The statement's answer, by ordinal: done (every column) or, with
	// idsOnly, got.
	var done map[int64]*driver.Job
	var got []bool
	if len(ids) > 0 {
		// One generic plan per connection (completePlanSettings). The arrays
		// travel in binary, the statement's types cached; QueryExecModeExec
		// sent them as text, which pgx spent ~1 µs a job formatting and
		// PostgreSQL then parsed.
		query := queries.Get("JobCompleteMany")
		if idsOnly {
			query = completeManyOrds
		}
		err := queryUnder(ctx, d.pool, completePlanSettings, query, func(rows pgx.Rows) (err error) {
			if idsOnly {
				got, err = ordinalsOnly(rows, len(ids))
			} else {
				done, err = ordinals(rows)
			}
			return err
		}, ids, attempts, tokens, results, reqs, nowArg(now))
		if err != nil {
			for i, p := range params {
				if out[i].Err == nil {
					out[i].Err = fmt.Errorf("complete job %d: %w", p.ID, err)
				}
			}
			return out
		}
	}
	for i, p := range params {
		if out[i].Err != nil {
			continue
		}
		if sent[i] > 0 && idsOnly && got[sent[i]] {
			continue // no job with idsOnly
		}
		if j, ok := done[sent[i]]; sent[i] > 0 && ok {
			out[i].Job = j
			continue
		}
		if sent[i] == repeatMention {
			out[i].Job, out[i].Err = d.JobComplete(ctx, p)
			continue
		}
		out[i].Job, out[i].Err = d.diagnose(ctx, d.pool, callOf("complete"), p.ID, p.RequestID, p.Attempt, driver.ErrLeaseLost)
	}
	return out
}

// JobStartMany implements driver.Driver like JobCompleteMany.
func (d *Driver) JobStartMany(ctx context.Context, params []driver.FenceParams) []driver.JobOutcome {
	out := make([]driver.JobOutcome, len(params))
	args := make([][]any, len(params))
	for i, p := range params {
		// Refused alone: PostgreSQL refuses a NUL in text, and the statement
		// that sent it would lose the whole batch.
		if err := driver.CheckRequestID(p.RequestID); err != nil {
			out[i].Err = fmt.Errorf("start job %d: %w", p.ID, err)
			continue
		}
		args[i] = []any{p.ID, p.Attempt, driver.CanonicalToken(p.LeaseToken), p.RequestID, nowArg(p.Now), micros(p.LeaseDuration)}
	}
	return d.batch(ctx, callOf("start"), "JobStart", params, args, out)
}

// batch runs one fenced statement per job in one transaction and one round trip.
// A guard that matches nothing rejects that job only; after commit each rejection
// is diagnosed (replay, not found, lease lost). A job whose outcome already holds
// an error (refused before the batch) is not sent. Any other error loses the
// transaction, with the statements that ran before it, and is the outcome of
// every job not refused before.
func (d *Driver) batch(ctx context.Context, op call, name string, params []driver.FenceParams, args [][]any, out []driver.JobOutcome) []driver.JobOutcome {
	fail := func(err error) []driver.JobOutcome {
		for i := range out {
			if out[i].Err == nil { // a job answered so far is rolled back too
				out[i] = driver.JobOutcome{Err: err}
			}
		}
		return out
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return fail(fmt.Errorf("%s jobs: %w", op, err))
	}
	defer func() { _ = tx.Rollback(ctx) }()
	batch := &pgx.Batch{}
	valid := make([]bool, len(params))
	for i, p := range params {
		if out[i].Err != nil {
			continue
		}
		if _, err := uuid.Parse(p.LeaseToken); err != nil || !attemptFits(p.Attempt) {
			continue // diagnosed after the commit: one such job lost the whole batch
		}
		valid[i] = true
		batch.Queue(queries.Get(name), args[i]...)
	}
	br := tx.SendBatch(ctx, batch)
	for i := range params {
		if !valid[i] {
			continue
		}
		rows, err := br.Query()
		if err != nil {
			_ = br.Close()
			return fail(fmt.Errorf("%s jobs: %w", op, err))
		}
		j, err := collectOne(rows)
		if err != nil {
			_ = br.Close()
			return fail(fmt.Errorf("%s jobs: %w", op, err))
		}
		out[i].Job = j
	}
	if err := br.Close(); err != nil {
		return fail(fmt.Errorf("%s jobs: %w", op, err))
	}
	// As a claim's (claimInTx): a COMMIT canceled once under way could commit
	// while the outcomes said it had not.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitBound)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		return fail(fmt.Errorf("%s jobs: commit: %w", op, err))
	}
	for i, p := range params {
		if out[i].Job == nil && out[i].Err == nil {
			out[i].Job, out[i].Err = d.diagnose(ctx, d.pool, op, p.ID, p.RequestID, p.Attempt, driver.ErrLeaseLost)
		}
	}
	return out
}

// JobFail implements driver.Driver.
func (d *Driver) JobFail(ctx context.Context, p driver.FailParams) (*driver.Job, error) {
	if err := driver.CheckTime("retry_at", p.RetryAt); err != nil {
		return nil, fmt.Errorf("fail job %d: %w", p.ID, err)
	}
	msg := driver.FailureText(p.Error) // text PostgreSQL would refuse fails nothing
	j, err := d.fenced(ctx, d.pool, call{"fail", driver.FailOps(p.Permanent)}, p.FenceParams, driver.ErrLeaseLost, "JobFail",
		p.ID, p.Attempt, driver.CanonicalToken(p.LeaseToken), p.RequestID, nowArg(p.Now), msg, p.Permanent, timeOrNil(p.RetryAt), driver.StackText(p.Stack),
		micros(p.RetryDelay))
	d.wakeIfDue(ctx, j, err, p.RetryAt, p.RetryDelay, p.Now)
	return j, err
}

// wakeIfDue wakes the queue of a job a retry or a snooze made claimable now
// (at, or now + delay when at is zero, not in the future), as an insert's
// wake-up does: without it the job waited for a worker's poll. A retry with no
// delay is a custom backoff's, a snooze of 0 s, or a worker's give-back at
// shutdown. The intent is judged, not the row's run_at, which the database's
// clock wrote.
func (d *Driver) wakeIfDue(ctx context.Context, j *driver.Job, err error, at time.Time, delay time.Duration, now *time.Time) {
	if err != nil || j.Replayed || j.Status != lifecycle.StatusQueued {
		return
	}
	if at.IsZero() {
		if delay > 0 {
			return
		}
	} else {
		t := time.Now()
		if now != nil {
			t = *now
		}
		if at.After(t) {
			return
		}
	}
	_ = d.WakeupPublish(ctx, []string{j.Queue})
}

// JobSnooze implements driver.Driver.
func (d *Driver) JobSnooze(ctx context.Context, p driver.SnoozeParams) (*driver.Job, error) {
	if err := driver.CheckTime("run_at", p.RunAt); err != nil {
		return nil, fmt.Errorf("snooze job %d: %w", p.ID, err)
	}
	j, err := d.fenced(ctx, d.pool, callOf("snooze"), p.FenceParams, driver.ErrLeaseLost, "JobSnooze",
		p.ID, p.Attempt, driver.CanonicalToken(p.LeaseToken), p.RequestID, nowArg(p.Now), timeOrNil(p.RunAt), micros(p.Delay))
	d.wakeIfDue(ctx, j, err, p.RunAt, p.Delay, p.Now)
	return j, err
}

// JobCancel implements driver.Driver.
func (d *Driver) JobCancel(ctx context.Context, p driver.CancelParams) (*driver.Job, error) {
	if err := driver.CheckRequestID(p.RequestID); err != nil {
		return nil, fmt.Errorf("cancel job %d: %w", p.ID, err)
	}
	actor := p.Actor
	if actor == "" {
		actor = "operator"
	}
	// A transition that commits while the statement waits for the job's lock
	// leaves it a row its snapshot does not match (the UPDATE reads the old
	// version, cur the new one), and the statement changes nothing. The job is
	// still cancelable then: run it again, in a transaction that first locks
	// the job (cancelLocked), so that no other transition can commit in
	// between. Run again only in a new snapshot, it missed as often as another
	// transition committed during its wait, and after five rounds the
	// operator's cancel of a live job was answered ErrInvalidTransition.
	var j *driver.Job
	rows, err := d.pool.Query(ctx, queries.Get("JobCancel"), p.ID, p.RequestID, actor, nowArg(p.Now))
	if err == nil { // the simple protocol's error comes from Query (fenced)
		j, err = collectOne(rows)
	}
	if err == nil && j == nil {
		// A job that is terminal (a repeat of this very cancel included) or
		// gone is diagnosed below; only a live one is worth another round.
		if status, _, serr := d.jobStatus(ctx, d.pool, p.ID); serr == nil && !status.Terminal() {
			j, err = d.cancelLocked(ctx, p, actor)
		}
	}
	if p.RequestID != "" && isRequestRepeat(err) {
		err = nil // the log holds the request_id already: diagnose answers it as a repeat
	}
	if err != nil {
		return nil, fmt.Errorf("cancel job %d: %w", p.ID, err)
	}
	if j != nil {
		d.wakeCanceled(ctx, j)
		return j, nil
	}
	return d.diagnose(ctx, d.pool, callOf("cancel"), p.ID, p.RequestID, 0, driver.ErrInvalidTransition)
}

// wakeCanceled names a job a cancel ended to the wake-up subscribers, if it
// was ever claimed: a worker that runs it then stops it at once, not at its
// next heartbeat (driver.CanceledWakeup). Best effort, as every wake-up: a
// NOTIFY that fails leaves the heartbeat to tell it.
func (d *Driver) wakeCanceled(ctx context.Context, j *driver.Job) {
	if j.Attempt > 0 && !j.Replayed {
		_ = d.WakeupPublish(ctx, []string{driver.CanceledWakeup(j.ID)})
	}
}

// cancelLocked runs JobCancel's statement in a transaction that has locked
// the job's row first: the statement's snapshot, taken once the lock is held,
// has the job as it is, and no transition can change it before the statement
// does, so it cancels any live job. The lock is the statement's own first
// lock (the job row, then ready rows under SKIP LOCKED), taken one statement
// earlier. nil without error: the job is terminal or gone.
func (d *Driver) cancelLocked(ctx context.Context, p driver.CancelParams, actor string) (*driver.Job, error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after a commit, a no-op
	if _, err := tx.Exec(ctx, "SELECT 1 FROM drover_jobs WHERE id = $1 FOR UPDATE", p.ID); err != nil {
		return nil, err
	}
	var j *driver.Job
	rows, err := tx.Query(ctx, queries.Get("JobCancel"), p.ID, p.RequestID, actor, nowArg(p.Now))
	if err == nil {
		j, err = collectOne(rows)
	}
	if err != nil || j == nil {
		return nil, err
	}
	// As a claim's (claimInTx): a COMMIT canceled once under way could commit
	// while the call reported it had not.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitBound)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		return nil, err
	}
	return j, nil
}

// fenced runs a guarded transition and, when its guard matched nothing, works out why.
func (d *Driver) fenced(ctx context.Context, q dbtx, op call, p driver.FenceParams, otherwise error, name string, args ...any) (*driver.Job, error) {
	if err := driver.CheckRequestID(p.RequestID); err != nil {
		// Refused as SQLite's driver refuses it, before PostgreSQL errs on it.
		return nil, fmt.Errorf("%s job %d: %w", op, p.ID, err)
	}
	if _, err := uuid.Parse(p.LeaseToken); err != nil || !attemptFits(p.Attempt) {
		// Not a token we could have issued, or an attempt no claim handed
		// out: never send them to a uuid or int4 column (pgx refuses to
		// encode such an attempt, and the call failed with that).
		return d.diagnose(ctx, q, op, p.ID, p.RequestID, p.Attempt, otherwise)
	}
	// The statement's error arrives from Query in the simple protocol
	// (default_query_exec_mode=simple_protocol) and from the rows otherwise:
	// both are read the same way.
	var j *driver.Job
	rows, err := q.Query(ctx, queries.Get(name), args...)
	if err == nil {
		j, err = collectOne(rows)
	}
	if p.RequestID != "" && isRequestRepeat(err) {
		// A repeat that ran while the first call was in flight and passed the
		// guard too (a heartbeat leaves the status as it is): the first one's
		// event holds the request_id, so this one rolled back. Answer as a repeat.
		return d.diagnose(ctx, q, op, p.ID, p.RequestID, p.Attempt, otherwise)
	}
	if err != nil {
		return nil, fmt.Errorf("%s job %d: %w", op, p.ID, err)
	}
	if j != nil {
		return j, nil
	}
	return d.diagnose(ctx, q, op, p.ID, p.RequestID, p.Attempt, otherwise)
}

// attemptFits reports whether attempt fits the int4 column: an attempt out of
// it is no job's, a stale fence.
func attemptFits(attempt int) bool { return attempt >= 0 && attempt <= math.MaxInt32 }

// isRequestRepeat reports whether err is the unique violation of an event
// whose job already logged the same request_id.
func isRequestRepeat(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "drover_job_events_job_request_idx"
}

// diagnose explains a guard that matched nothing: a repeated request_id answers
// with the job as it is; a missing job is ErrNotFound; anything else is otherwise.
func (d *Driver) diagnose(ctx context.Context, q dbtx, op call, id int64, requestID string, attempt int, otherwise error) (*driver.Job, error) {
	if requestID != "" {
		j, err := d.replay(ctx, q, op, id, requestID, attempt)
		if errors.Is(err, driver.ErrLeaseLost) {
			return nil, err // RepeatAnswer's, which names the call and the job
		}
		if err != nil {
			return nil, fmt.Errorf("%s job %d: %w", op, id, err)
		}
		if j != nil {
			return j, nil
		}
	}
	status, attempt, err := d.jobStatus(ctx, q, id)
	if err != nil {
		return nil, fmt.Errorf("%s job %d: %w", op, id, err)
	}
	return nil, driver.Refused(op.verb, id, status, attempt, otherwise)
}

// jobStatus reads a job's status and attempt; ErrNotFound if there is no job.
func (d *Driver) jobStatus(ctx context.Context, q dbtx, id int64) (lifecycle.Status, int, error) {
	var status string
	var attempt int
	err := q.QueryRow(ctx, queries.Get("JobStatus"), id).Scan(&status, &attempt)
	if isNoRows(err) {
		return "", 0, driver.ErrNotFound
	}
	return lifecycle.Status(status), attempt, err
}

// replay returns the job if its log already holds requestID, else nil. Only a
// call of the same kind (op's ops) is a repeat, and a lease holder's call
// (attempt > 0) only at the attempt that logged requestID; any other is
// refused (driver.CheckRepeat).
func (d *Driver) replay(ctx context.Context, q dbtx, op call, id int64, requestID string, attempt int) (*driver.Job, error) {
	var usedBy int
	var logged string
	err := q.QueryRow(ctx, queries.Get("EventSeen"), requestID, id).Scan(&usedBy, &logged)
	if isNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, queries.Get("JobGet"), id)
	if err != nil {
		return nil, err
	}
	j, err := collectOne(rows)
	if err != nil || j == nil {
		return nil, err
	}
	if err := driver.CheckRepeat(requestID, j, logged, usedBy, op.ops, attempt); err != nil {
		return nil, err
	}
	if j, err = driver.RepeatAnswer(j, op.ops, attempt); err != nil {
		return nil, err
	}
	j.Replayed = true
	return j, nil
}

// call names a transition call: verb for its errors, and ops, what it asks
// for, to tell a repeat of it from another call that reused its request_id
// (driver.CheckRepeat).
type call struct {
	verb string
	ops  []lifecycle.Op
}

// callOf is the call named verb that performs the lifecycle operation of that name.
func callOf(verb string) call { return call{verb, []lifecycle.Op{lifecycle.Op(verb)}} }

func (c call) String() string { return c.verb }

// timeOrNil sends a zero time as NULL, so the statement falls back to a delay.
func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
