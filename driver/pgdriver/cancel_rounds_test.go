package pgdriver_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

// cancelHook calls before, if set, ahead of each JobCancel statement a pool
// sends (its text names 'canceled'). The pool's other statements (the
// wakeup an insert sends in the background) read it as the test sets it.
type cancelHook struct{ before atomic.Pointer[func()] }

func (h *cancelHook) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if before := h.before.Load(); before != nil && strings.Contains(data.SQL, "'canceled'") && strings.Contains(data.SQL, "UPDATE drover_jobs") {
		(*before)()
	}
	return ctx
}

func (h *cancelHook) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// An operator's cancel of a job whose status another transaction changes
// while the cancel's statement waits for the job's lock, six times in a row
// (a handler that snoozes itself for no time, and the workers that claim it
// again, by turns): the cancel still cancels the job. JobCancel ran its
// statement again after each such miss, five rounds at most, and then
// answered the job, queued and cancelable, ErrInvalidTransition: the operator
// was told the cancel was refused while the job ran on.
func TestCancelOutlastsChangesWhileItWaits(t *testing.T) {
	ctx := context.Background()
	hook := &cancelHook{}
	d, running := runningJobTraced(t, hook)
	id := running.ID

	// hold takes the job's row lock in a transaction of its own, if no one
	// holds it (nil if someone does: the cancel itself, which then waits for
	// no one).
	hold := func() pgx.Tx {
		tx, err := d.Pool().Begin(ctx)
		if err != nil {
			t.Error(err)
			return nil
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		if _, err := tx.Exec(ctx, "SELECT 1 FROM drover_jobs WHERE id = $1 FOR UPDATE NOWAIT", id); err != nil {
			if !strings.Contains(err.Error(), "55P03") {
				t.Error(err)
			}
			_ = tx.Rollback(ctx)
			return nil
		}
		return tx
	}
	// change moves the job on and commits: a snooze (running → queued) or a
	// claim that starts it (queued → running), by turns.
	change := func(tx pgx.Tx, i int) {
		q := `UPDATE drover_jobs SET status = 'queued', owner = NULL, lease_token = NULL, lease_expires_at = NULL,
			claim_seq = NULL, executions = executions - 1, rev = rev + 1 WHERE id = $1`
		if i%2 == 1 {
			q = `UPDATE drover_jobs SET status = 'running', owner = 'w', lease_token = gen_random_uuid(),
				lease_expires_at = now() + interval '30 seconds', attempt = attempt + 1, executions = executions + 1,
				started_at = now(), rev = rev + 2 WHERE id = $1`
		}
		if _, err := tx.Exec(ctx, q, id); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Ahead of each of the cancel's statements (the first six), a holder
	// takes the job's row, so that the statement waits for it; the test then
	// changes the job's status and commits.
	const changes = 6
	held := make(chan pgx.Tx)
	sent := 0
	before := func() {
		if sent++; sent <= changes {
			held <- hold()
		}
	}
	hook.before.Store(&before)
	type answer struct {
		j   *driver.Job
		err error
	}
	canceled := make(chan answer, 1)
	go func() {
		j, err := d.JobCancel(ctx, driver.CancelParams{ID: id})
		canceled <- answer{j, err}
	}()
	var got *answer
	for i := 0; i < changes && got == nil; i++ {
		select {
		case a := <-canceled:
			got = &a
		case tx := <-held:
			if tx == nil {
				continue // the cancel holds the row: no one can change it under it
			}
			waitBlocked(t, d, "'canceled'", backendPID(t, tx))
			change(tx, i)
		case <-time.After(10 * time.Second):
			t.Fatalf("the cancel neither sent its statement a %d time nor answered", i+1)
		}
	}
	if got == nil {
		a := <-canceled
		got = &a
	}
	cur, err := d.JobGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.err != nil || got.j == nil || got.j.Status != lifecycle.StatusCanceled || cur.Status != lifecycle.StatusCanceled {
		t.Fatalf("cancel of a job whose status changed while it waited = %v, %v; job is %s, want canceled", got.j, got.err, cur.Status)
	}
}

// runningJobTraced opens a migrated driver whose pool's queries go through
// tracer, and gives it one job, claimed and started by worker "w".
func runningJobTraced(t *testing.T, tracer pgx.QueryTracer) (*pgdriver.Driver, *driver.Job) {
	t.Helper()
	ctx := context.Background()
	_, d := tracedDriver(t, testdb.PostgresURL(t), tracer)
	t.Cleanup(func() { _ = d.Close() })
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	insertWaiting(t, d, 1)
	jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "w", Start: true})
	if err != nil || len(jobs) != 1 {
		t.Fatal(jobs, err)
	}
	return d, jobs[0]
}
