package pgdriver_test

import (
	"context"
	"encoding/json"
	"errors"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/internal/testdb"
)

// afterInsert runs hook once, when the insert statement's answer has been
// read: the moment a caller's deadline could pass between the insert and the
// read of the jobs whose idempotency key existed. Only the insert's own end
// fires it: the pool's other statements (the wakeup an earlier insert sends
// in the background, a SELECT too) would cancel the call at any moment, the
// insert's included.
type afterInsert struct {
	armed atomic.Bool
	hook  func()
}

type insertStatement struct{}

func (a *afterInsert) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "INSERT INTO drover_jobs") {
		return context.WithValue(ctx, insertStatement{}, true)
	}
	return ctx
}

func (a *afterInsert) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if data.Err == nil && ctx.Value(insertStatement{}) != nil && a.armed.CompareAndSwap(true, false) {
		a.hook()
	}
}

// TestJobInsertManyTxCanceledAfterItsInsert: a context canceled after the
// insert has run in the caller's transaction, before the read of the keys
// that existed, fails the call; the caller's transaction must then hold none
// of the batch or refuse to commit. pgx refuses a statement on a done context
// without sending it, so the transaction stayed healthy with the batch's new
// jobs in it: a caller told "context canceled" that committed its own work
// committed them too, and one that enqueued again in the transaction
// enqueued them twice.
func TestJobInsertManyTxCanceledAfterItsInsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.PostgresURL(t)
	openURL(t, url) // migrates
	tr := &afterInsert{}
	pool, d := tracedDriver(t, url, tr)
	job := func(kind, key string) driver.InsertParams {
		return driver.InsertParams{Kind: kind, Queue: "q", Args: json.RawMessage(`{}`), MaxAttempts: 1, IdempotencyKey: key}
	}
	if _, err := d.JobInsertMany(ctx, []driver.InsertParams{job("charge", "order-1")}); err != nil {
		t.Fatal(err)
	}

	for _, nested := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		into := pgx.Tx(tx)
		if nested {
			if into, err = tx.Begin(ctx); err != nil {
				t.Fatal(err)
			}
		}
		callCtx, cancel := context.WithCancel(ctx)
		tr.hook = cancel
		tr.armed.Store(true)
		email := map[bool]string{false: "email", true: "email-nested"}[nested]
		res, err := d.JobInsertManyTx(callCtx, into, []driver.InsertParams{job(email, ""), job("charge", "order-1")})
		cancel()
		if tr.armed.Load() {
			t.Fatal("the insert did not run")
		}
		if err == nil {
			if len(res) != 2 || !res[1].Existing {
				t.Fatalf("nested=%v: results %+v, want the email job and the existing charge job", nested, res)
			}
			continue
		}
		if nested {
			// The savepoint undone, the outer transaction goes on.
			if err := into.Rollback(ctx); err != nil {
				t.Fatalf("nested: rolling the savepoint back after the failed insert: %v", err)
			}
			if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
				t.Fatalf("nested: the outer transaction after the savepoint's rollback: %v", err)
			}
		}
		var emails int
		qerr := tx.QueryRow(ctx, "SELECT count(*) FROM drover_jobs WHERE kind = $1", email).Scan(&emails)
		cerr := tx.Commit(ctx)
		if qerr == nil && cerr == nil && emails != 0 {
			t.Errorf("nested=%v: JobInsertManyTx failed (%v), yet the caller's transaction committed with %d email jobs of its batch in it", nested, err, emails)
		}
		if nested && (qerr != nil || cerr != nil) {
			t.Errorf("nested: the outer transaction failed after its savepoint was rolled back: %v, %v", qerr, cerr)
		}
	}
}

// TestJobInsertManyTxInAnotherSchema: a caller's transaction whose
// search_path reaches another schema's drover_jobs (another Drover
// installation's, on a pool of the application's) is refused, naming the
// schemas, and inserts nothing there; one whose search_path reaches the
// driver's tables behind a schema of the application's own is taken. The
// insert went into the other schema's tables: the job ran under the other
// installation's workers, or none, and the answered id named another job.
func TestJobInsertManyTxInAnotherSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ours, theirs, app := testdb.PostgresURL(t), testdb.PostgresURL(t), testdb.PostgresURL(t)
	d, other := openURL(t, ours), openURL(t, theirs)
	job := []driver.InsertParams{{Kind: "k", Queue: "q", Args: json.RawMessage(`{}`), MaxAttempts: 1}}

	tx, err := other.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	res, err := d.JobInsertManyTx(ctx, tx, job)
	if err == nil {
		_ = tx.Commit(ctx)
		got, _ := other.JobGet(ctx, res[0].Job.ID)
		t.Fatalf("JobInsertManyTx in a transaction whose search_path is another installation's schema: no error; the job went into its tables (%v)", got != nil)
	}
	if !errors.Is(err, driver.ErrInvalidArgument) || !strings.Contains(err.Error(), "search_path") {
		t.Errorf("JobInsertManyTx in another schema: error %q, want an invalid-argument error naming search_path", err)
	}
	_ = tx.Rollback(ctx)

	// The application's schema first, then the driver's: drover_jobs is ours.
	both := testdb.WithSearchPath(testdb.PostgresBaseURL(), schemaOf(t, app)+","+schemaOf(t, ours))
	pool, err := pgxpool.New(ctx, both)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tx2, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(ctx)
	res, err = d.JobInsertManyTx(ctx, tx2, job)
	if err != nil {
		t.Fatalf("JobInsertManyTx with the driver's schema behind the application's on search_path: %v", err)
	}
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.JobGet(ctx, res[0].Job.ID); err != nil {
		t.Errorf("the job committed behind the application's schema: %v", err)
	}
}

func schemaOf(t *testing.T, u string) string {
	t.Helper()
	pu, err := neturl.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return pu.Query().Get("search_path")
}

// TestJobInsertManyTxSameKeyConcurrently: a transaction enqueuing a key that
// another, uncommitted one holds waits for it, then answers the job that
// committed with Existing, or, the other rolled back, inserts the job: one
// job per key either way, and the waiting transaction commits.
func TestJobInsertManyTxSameKeyConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	for _, commitFirst := range []bool{true, false} {
		key := map[bool]string{true: "after-commit", false: "after-rollback"}[commitFirst]
		job := []driver.InsertParams{{Kind: "k", Queue: "q", Args: json.RawMessage(`{}`), MaxAttempts: 1, IdempotencyKey: key}}
		tx1, err := d.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		first, err := d.JobInsertManyTx(ctx, tx1, job)
		if err != nil {
			t.Fatal(err)
		}
		var pid uint32
		type answer struct {
			res []driver.InsertResult
			err error
		}
		done := make(chan answer, 1)
		tx2, err := d.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pid = tx2.Conn().PgConn().PID()
		go func() {
			res, err := d.JobInsertManyTx(ctx, tx2, job)
			if err == nil {
				err = tx2.Commit(ctx)
			}
			done <- answer{res, err}
		}()
		// Wait until the second insert waits on the first's key.
		deadline := time.Now().Add(10 * time.Second)
		for waiting := false; !waiting; {
			if err := d.Pool().QueryRow(ctx, "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatal("the second transaction's insert never waited on the first's key")
			}
		}
		if commitFirst {
			err = tx1.Commit(ctx)
		} else {
			err = tx1.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		a := <-done
		if a.err != nil {
			t.Fatalf("commitFirst=%v: the second transaction: %v", commitFirst, a.err)
		}
		if got := a.res[0]; got.Existing != commitFirst || (commitFirst && got.Job.ID != first[0].Job.ID) {
			t.Errorf("commitFirst=%v: second answer Existing=%v id=%d, first id=%d", commitFirst, got.Existing, got.Job.ID, first[0].Job.ID)
		}
		var n int
		if err := d.Pool().QueryRow(ctx, "SELECT count(*) FROM drover_jobs WHERE idempotency_key = $1", key).Scan(&n); err != nil || n != 1 {
			t.Errorf("commitFirst=%v: %d jobs hold the key (%v), want 1", commitFirst, n, err)
		}
	}
}

// tracedDriver opens a driver over a pool of its own on url (migrated
// already), whose connections report their statements to tr.
func tracedDriver(t *testing.T, url string, tr pgx.QueryTracer) (*pgxpool.Pool, *pgdriver.Driver) {
	return driverOnPool(t, url, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = tr })
}

// driverOnPool opens a driver over a pool of its own on url, configured by
// configure; the pool is closed at t's cleanup.
func driverOnPool(t *testing.T, url string, configure func(*pgxpool.Config)) (*pgxpool.Pool, *pgdriver.Driver) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	configure(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	d, err := pgdriver.NewFromPool(ctx, pool, pgdriver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return pool, d
}
