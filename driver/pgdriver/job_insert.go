package pgdriver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// JobInsertMany implements driver.Driver.
func (d *Driver) JobInsertMany(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	// One transaction, whose COMMIT is sent only while ctx is live (commit),
	// so that an error means nothing was enqueued. Sent on the pool, the
	// insert committed on its own when it ended, even after a canceled ctx
	// had closed its connection and answered an error: a retry, as an error
	// invites, enqueued the batch twice, and jobs without an idempotency key
	// have nothing to tell a repeat (helper-91). A batch with keys also reads
	// the jobs of the keys that existed after its insert (and inserts again
	// those whose job was deleted in between); a read that failed after an
	// insert that had committed answered an error for a batch whose jobs were
	// there (helper-79).
	keyed := slices.ContainsFunc(params, func(p driver.InsertParams) bool { return p.IdempotencyKey != "" })
	for try := 1; ; try++ {
		var res []driver.InsertResult
		err := d.commit(ctx, func(tx pgx.Tx) (err error) {
			res, _, err = d.insertMany(ctx, tx, params, inOwnTx)
			return err
		})
		if err == nil {
			d.publishReady(newJobs(res))
			return res, nil
		}
		// Batches that name the same keys in other orders can deadlock
		// (insertMany): this one's transaction is rolled back, and runs again.
		if !keyed || !isDeadlock(err) || try == insertTries {
			return nil, err
		}
	}
}

// commitWait bounds the COMMIT or ROLLBACK that commit sends, which do not
// end with its caller's ctx.
const commitWait = 10 * time.Second

// commit runs fn in a transaction on the pool and commits it, unless fn
// failed or ctx ended first: then nothing is committed, and the error says
// so truly (a statement cut short by ctx closes its connection, which rolls
// the transaction back). The COMMIT itself is sent without ctx's
// cancellation, bounded by commitWait, so that a ctx that ends while it is on
// its way does not leave the caller an error for work that committed. Only a
// connection lost during the COMMIT leaves the outcome unknown.
func (d *Driver) commit(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return err
	}
	// The ROLLBACK or COMMIT is sent whatever became of ctx, bounded from
	// when it is sent.
	end := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), commitWait)
	}
	if err := fn(tx); err != nil {
		rctx, cancel := end()
		defer cancel()
		_ = tx.Rollback(rctx)
		return err
	}
	ectx, cancel := end()
	defer cancel()
	if err := ctx.Err(); err != nil {
		_ = tx.Rollback(ectx)
		return fmt.Errorf("insert jobs: nothing committed: %w", err)
	}
	if err := tx.Commit(ectx); err != nil {
		return fmt.Errorf("insert jobs: commit: %w", err)
	}
	return nil
}

// insertMode is where insertMany's statements run.
type insertMode int

const (
	inOwnTx    insertMode = iota // in the driver's transaction: its caller wakes the workers once it commits
	inCallerTx                   // in the caller's (JobInsertManyTx): a NOTIFY in the insert, sent when it commits
)

// newJobs are the jobs results inserted (not those of keys that existed).
func newJobs(results []driver.InsertResult) []*driver.Job {
	jobs := make([]*driver.Job, 0, len(results))
	for _, r := range results {
		if !r.Existing && r.Job != nil {
			jobs = append(jobs, r.Job)
		}
	}
	return jobs
}

// insertTries bounds the sendings of an insert that deadlocked.
const insertTries = 5

// isMismatch reports the insert's refusal of a caller's transaction on
// another database, or whose drover_jobs is another schema's (insertQueries):
// the failed cast of the refusal marked by prefix.
func isMismatch(err error, prefix string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22P02" && strings.Contains(pgErr.Message, prefix)
}

// isNoDroverTable reports PostgreSQL's undefined_table for one of Drover's
// tables: the caller's transaction's search_path reaches none.
func isNoDroverTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01" && strings.Contains(pgErr.Message, `"drover_`)
}

func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

// JobInsertManyTx implements driver.Driver; tx must be a pgx.Tx. An error
// after the insert was sent leaves tx aborted, as a failed statement does
// (spoil): the caller rolls it back. A tx whose search_path does not lead to
// the driver's drover_jobs is refused so, with an invalid tx.
func (d *Driver) JobInsertManyTx(ctx context.Context, tx any, params []driver.InsertParams) ([]driver.InsertResult, error) {
	ptx, ok := tx.(pgx.Tx)
	if !ok || driver.IsNilPointer(tx) {
		return nil, driver.Invalid("tx", "the PostgreSQL driver needs a pgx.Tx, got %T", tx)
	}
	if len(params) == 0 {
		return nil, nil
	}
	res, sent, err := d.insertMany(ctx, ptx, params, inCallerTx)
	if err != nil && sent {
		err = spoil(ctx, ptx, err)
	}
	return res, err
}

// spoil aborts the caller's transaction after a failed insert that may have
// left jobs in it, so that it cannot commit them. A statement that fails on
// the server aborts it already, and one cut off by ctx closes its connection;
// but pgx refuses a statement on a context already done without sending it,
// so a deadline that passed between the insert and the read of the existing
// keys failed the call with the batch's new jobs in a healthy transaction: a
// caller that committed its own work anyway committed them, and one that
// enqueued again enqueued them twice. A savepoint (a nested pgx.Tx) rolled
// back undoes the abort.
func spoil(ctx context.Context, tx pgx.Tx, err error) error {
	conn := tx.Conn().PgConn()
	if conn.IsClosed() || conn.TxStatus() != 'T' {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, aerr := tx.Exec(ctx, `DO $$BEGIN RAISE EXCEPTION 'drover: an enqueue in this transaction failed after inserting jobs; roll it back'; END$$`,
		pgx.QueryExecModeSimpleProtocol)
	var pgErr *pgconn.PgError
	if !errors.As(aerr, &pgErr) || pgErr.Code != "P0001" {
		return fmt.Errorf("%w (the transaction may hold some of the jobs, and aborting it failed: %v; roll it back)", err, aerr)
	}
	return fmt.Errorf("%w (the transaction may have held some of the jobs and is aborted: roll it back)", err)
}

// insertQueries[keyed][inTx] is JobInsertMany in four forms.
//
// Without its ON CONFLICT clause (keyed 0) for a batch in which no job has an
// idempotency key. Such a row cannot conflict (the unique index holds only keyed
// rows), but with the clause PostgreSQL inserts every row speculatively: an
// arbiter check and a confirmation record in the WAL for each one. Without it,
// inserting a batch of 1,000 no-op jobs took 7.8 instead of 9.2 µs and 536
// instead of 584 bytes of WAL a job (pg_stat_statements, 300k burn-downs).
//
// With its NOTIFY (inTx 1) only in the caller's transaction. A NOTIFY holds a
// lock that serializes the commits of notifying transactions, each one's WAL
// flush included, so concurrent enqueues that each notify commit one at a time,
// a flush each, instead of sharing flushes. At 1,000 single enqueues a second
// from 16 goroutines on the development machine, an enqueue took twice as long
// with its NOTIFY as without (pgbench: 3.2-4.4 against 1.5-2.1 ms on average),
// and the harness's latency workload saw a p99 of 36-47 against 24-28 ms from
// enqueue to start (fortieth session, bench/compare/HISTORY.md). An insert
// in the driver's own transaction (JobInsertMany) has its wake-up sent after
// that commits, in a statement that writes no WAL (publishReady). One in the caller's
// transaction cannot wait for a commit it does not see, and keeps its NOTIFY,
// delivered when that transaction commits.
//
// With its check that drover_jobs is the driver's (homeCheck) only in the
// caller's transaction, whose search_path the driver does not set.
var insertQueries = func() (q [2][2]string) {
	const conflict = "ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING"
	const notify = "count(pg_notify($15, queue))"
	const homeCheck = "'drover_jobs'::regclass IS DISTINCT FROM to_regclass(format('%I.drover_jobs', $16::text))"
	const dbCheck = "current_database() <> $17::text"
	q[1][1] = queries.Get("JobInsertMany")
	q[0][1] = replaceOnce(q[1][1], conflict, "")
	// $15 to $17 stay typed and used, so every variant takes the same arguments.
	q[1][0] = replaceOnce(replaceOnce(replaceOnce(q[1][1], notify, "count($15::text)"), homeCheck, "$16::text IS NULL"), dbCheck, "$17::text IS NULL")
	q[0][0] = replaceOnce(replaceOnce(replaceOnce(q[0][1], notify, "count($15::text)"), homeCheck, "$16::text IS NULL"), dbCheck, "$17::text IS NULL")
	return q
}()

// insertMany inserts and logs the jobs in one statement, then fetches the
// rows whose idempotency key existed already. tx is the driver's own
// transaction or the caller's; mode says which. In the caller's transaction
// the wake-up is a NOTIFY in the statement, delivered when that transaction
// commits; in the driver's own its caller sends it once that commits
// (insertQueries). sent says, with an error, whether the insert may have run:
// in the caller's transaction its jobs may be there.
func (d *Driver) insertMany(ctx context.Context, tx dbtx, params []driver.InsertParams, mode insertMode) (_ []driver.InsertResult, sent bool, _ error) {
	inTx := mode == inCallerTx
	n := len(params)
	// binArray: pgx reads a plain slice's elements as values of type any,
	// boxing each (scan.go).
	var (
		kinds, queues, args, actors = make(binArray[pgtype.Text], n), make(binArray[pgtype.Text], n), make(binArray[pgtype.Text], n), make(binArray[pgtype.Text], n)
		metas, keys, nodes          = make(binArray[pgtype.Text], n), make(binArray[pgtype.Text], n), make(binArray[pgtype.Text], n)
		prios, maxes                = make(binArray[pgtype.Int4], n), make(binArray[pgtype.Int4], n)
		runAts                      = make(binArray[pgtype.Timestamptz], n)
		timeouts, retryOf, runIDs   = make(binArray[pgtype.Int8], n), make(binArray[pgtype.Int8], n), make(binArray[pgtype.Int8], n)
	)
	text := func(s string) pgtype.Text { return pgtype.Text{String: s, Valid: true} }
	keyed := false
	for i, p := range params {
		kinds[i], queues[i], args[i] = text(p.Kind), text(p.Queue), text(string(p.Args))
		if p.Metadata != nil {
			metas[i] = text(string(p.Metadata))
		}
		prios[i], maxes[i] = pgtype.Int4{Int32: int32(p.Priority), Valid: true}, pgtype.Int4{Int32: int32(p.MaxAttempts), Valid: true}
		if p.RunAt != nil {
			runAts[i] = pgtype.Timestamptz{Time: *p.RunAt, Valid: true}
		}
		timeouts[i] = pgtype.Int8{Int64: p.Timeout.Milliseconds(), Valid: true}
		if p.IdempotencyKey != "" {
			keys[i], keyed = text(p.IdempotencyKey), true
		}
		if p.WorkflowNode != "" {
			nodes[i] = text(p.WorkflowNode)
		}
		if p.RetryOf != nil {
			retryOf[i] = pgtype.Int8{Int64: *p.RetryOf, Valid: true}
		}
		if p.WorkflowRunID != nil {
			runIDs[i] = pgtype.Int8{Int64: *p.WorkflowRunID, Valid: true}
		}
		actors[i] = text(p.Actor)
		if p.Actor == "" {
			actors[i] = text("client")
		}
	}
	var inserted []*driver.Job
	{
		rows, err := tx.Query(ctx, insertQueries[b2i(keyed)][b2i(inTx)], kinds, queues, args, metas, prios, runAts,
			maxes, timeouts, keys, retryOf, runIDs, nodes, nil, actors, d.channel, d.schema, d.dbName)
		if err == nil {
			inserted, err = collectJobs(rows)
		}
		if err != nil {
			// The refusal is a failed statement in the caller's transaction, so
			// it leaves it aborted, as any failed statement does: its work
			// cannot commit without the jobs it meant to enqueue.
			if inTx && isMismatch(err, "drover_database_mismatch: ") {
				return nil, false, driver.Invalid("tx", "it is on another database than the driver's (%s): "+
					"begin it on the driver's Pool(); the transaction is aborted: roll it back", d.dbName)
			}
			if inTx && isMismatch(err, "drover_schema_mismatch: ") {
				return nil, false, driver.Invalid("tx", "its search_path leads to another schema's drover_jobs than the driver's (%s): "+
					"begin it on the driver's Pool(), or put the driver's schema first on its search_path; the transaction is aborted: roll it back", d.schema)
			}
			if inTx && isNoDroverTable(err) {
				return nil, false, driver.Invalid("tx", "its search_path reaches no drover_jobs (the driver's are in schema %s): "+
					"begin it on the driver's Pool(), or put the driver's schema on its search_path; the transaction is aborted: roll it back", d.schema)
			}
			// Two batches that name the same idempotency keys in other
			// orders each wait, through ON CONFLICT, for a key the other
			// inserted first, and PostgreSQL ends one with a deadlock: its
			// transaction is aborted, and JobInsertMany (or the caller of
			// JobInsertManyTx) runs it again.
			return nil, !pgconn.SafeToRetry(err), fmt.Errorf("insert jobs: %w", err)
		}
	}
	sent = true

	// Match results to inputs: keyed rows by key; unkeyed rows in id order, which is
	// input order because the insert consumes its input ordered by ordinality.
	byKey := map[string]*driver.Job{}
	var unkeyed []*driver.Job
	for _, j := range inserted {
		if j.IdempotencyKey != "" {
			byKey[j.IdempotencyKey] = j
		} else {
			unkeyed = append(unkeyed, j)
		}
	}
	var missing []string
	for _, p := range params {
		if k := p.IdempotencyKey; k != "" && byKey[k] == nil {
			missing = append(missing, k)
		}
	}
	existing := map[string]*driver.Job{}
	if len(missing) > 0 {
		rows, err := tx.Query(ctx, queries.Get("JobGetByKeys"), missing)
		if err != nil {
			return nil, true, fmt.Errorf("insert jobs: fetch existing keys: %w", err)
		}
		found, err := collectJobs(rows)
		if err != nil {
			return nil, true, fmt.Errorf("insert jobs: fetch existing keys: %w", err)
		}
		for _, j := range found {
			existing[j.IdempotencyKey] = j
		}
	}
	out := make([]driver.InsertResult, n)
	claimedKey := map[string]bool{}
	var gone []int // inputs whose key's job was deleted between the two statements
	for i, p := range params {
		switch k := p.IdempotencyKey; {
		case k == "":
			if len(unkeyed) == 0 {
				return nil, true, fmt.Errorf("insert jobs: database returned fewer rows than inserted")
			}
			out[i] = driver.InsertResult{Job: unkeyed[0]}
			unkeyed = unkeyed[1:]
		case byKey[k] != nil && !claimedKey[k]:
			claimedKey[k] = true
			out[i] = driver.InsertResult{Job: byKey[k]}
		case byKey[k] != nil:
			out[i] = driver.InsertResult{Job: byKey[k], Existing: true}
		case existing[k] != nil:
			out[i] = driver.InsertResult{Job: existing[k], Existing: true}
		default:
			gone = append(gone, i)
		}
	}
	if len(gone) > 0 {
		// The job that held the key was deleted (retention, a DLQ purge)
		// between the insert and the read, so the key is free: these are
		// inserted now. An error here said "retry" after the rest of the
		// batch had committed, and the retry enqueued that rest twice.
		again := make([]driver.InsertParams, len(gone))
		for g, i := range gone {
			again[g] = params[i]
		}
		res, _, err := d.insertMany(ctx, tx, again, mode)
		if err != nil {
			return nil, true, err
		}
		for g, i := range gone {
			out[i] = res[g]
		}
	}
	return out, true, nil
}

// publishReady wakes the workers of the queues that got a job claimable now:
// queued, with its run_at at its created_at (both are the statement's now
// unless the job names a run_at). The jobs are committed, so the wake-up goes
// out behind the insert's back (wakeups.add) and cannot fail it: workers poll,
// and a caller must not be told to retry what exists.
func (d *Driver) publishReady(inserted []*driver.Job) {
	queues := map[string]bool{}
	for _, j := range inserted {
		if j.Status == lifecycle.StatusQueued && !j.RunAt.After(j.CreatedAt) {
			queues[j.Queue] = true
		}
	}
	d.wakeups.add(d, queues)
}

// wakeSender sends the wake-ups of committed inserts, coalesced: while one
// NOTIFY statement is on its way, the queues of later inserts gather and go out
// together in the next. At most one sender runs, on a goroutine started when
// a wake-up arrives and none runs, which ends once nothing is left to send. A
// queue added while a statement is on its way is sent by a later statement,
// one that begins after the add and so after its insert's commit: a worker it
// wakes sees the job.
type wakeSender struct {
	mu      sync.Mutex
	queues  map[string]bool
	sending bool
}

func (w *wakeSender) add(d *Driver, queues map[string]bool) {
	if len(queues) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queues == nil {
		w.queues = map[string]bool{}
	}
	maps.Copy(w.queues, queues)
	if !w.sending {
		w.sending = true
		go w.send(d)
	}
}

func (w *wakeSender) send(d *Driver) {
	for {
		w.mu.Lock()
		queues := keysOf(w.queues)
		clear(w.queues)
		if len(queues) == 0 {
			w.sending = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := d.WakeupPublish(ctx, queues)
		cancel()
		if err != nil && !d.closed.Load() {
			d.log.Warn("insert: the jobs are stored, but waking their workers failed; they find them by polling", "queues", queues, "err", err)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
