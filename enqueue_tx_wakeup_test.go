package drover_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver/sqlitedriver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/wakeup"
)

// The in-process wake-up of a job enqueued in a caller's SQLite transaction
// goes out before that transaction commits, and is not wasted: the woken
// worker's claim waits for the driver's one write connection, which the
// caller's transaction holds, and so runs after the commit and finds the job.
// The job starts at once after the commit, not a poll interval (here a
// minute) later; the test holds the transaction open until the claim is
// seen waiting, so a claim that ran before the commit and found nothing would
// leave the job to the poll, and fail it. (Measured on PostgreSQL, where the
// wake-up is a NOTIFY in the caller's transaction, delivered at its commit:
// the job started 3-4 ms after it, and TestInsertWakeUpsFollowCommits
// covers it.)
func TestEnqueueTxWakesTheWorkerAfterTheCommitOnSQLite(t *testing.T) {
	t.Parallel()
	for _, viaTransport := range []bool{false, true} {
		d := testdb.Open(t, "sqlite").(*sqlitedriver.Driver)
		cfg := &drover.Config{}
		if viaTransport {
			cfg.Wakeups = wakeup.FromDriver(d)
		}
		c, err := drover.NewClient(d, cfg)
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan time.Time, 1)
		ws := drover.NewWorkers()
		drover.Register(ws, "k", func(context.Context, *drover.Job, struct{}) (any, error) {
			started <- time.Now()
			return nil, nil
		})
		wc := fastWorkerConfig(ws)
		wc.PollInterval = time.Minute
		wc.Wakeups = cfg.Wakeups
		startWorker(t, c, wc)
		// A first job, run and stored, so that neither the worker's first
		// claim nor the completion of this job waits for the write
		// connection below.
		warm := enqueue(t, c, "k", nil, nil)
		waitChan(t, started, "the first job to start")
		for getJob(t, c, warm.ID).Status != drover.StatusSucceeded {
			time.Sleep(time.Millisecond)
		}

		tx, err := d.DB().BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		waits := d.DB().Stats().WaitCount
		if _, err := c.EnqueueTx(context.Background(), tx, "k", nil, nil); err != nil {
			_ = tx.Rollback()
			t.Fatal(err)
		}
		for deadline := time.Now().Add(waitTimeout); d.DB().Stats().WaitCount == waits; {
			if time.Now().After(deadline) {
				_ = tx.Rollback()
				t.Fatalf("transport %v: no claim waited for the write connection within %s of EnqueueTx: the worker was not woken, or claimed without waiting for the caller's transaction", viaTransport, waitTimeout)
			}
			time.Sleep(time.Millisecond)
		}
		committed := time.Now()
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-started:
			if took := s.Sub(committed); took > 10*time.Second {
				t.Errorf("transport %v: the job started %s after its commit; want well within the poll interval (%s)", viaTransport, took, wc.PollInterval)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("transport %v: the job did not start within 30s of its commit (poll interval %s): the wake-up was spent before the commit", viaTransport, wc.PollInterval)
		}
	}
}
