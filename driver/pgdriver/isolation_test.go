package pgdriver_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/internal/testdb"
)

// Drover's statements are written for READ COMMITTED. Under REPEATABLE READ or
// SERIALIZABLE a statement that waits for a row another transaction then
// changes fails with 40001 where READ COMMITTED rechecks the row: concurrent
// claims failed, one heartbeat failed a whole batch of completions, and
// concurrent DLQ requeues could each create a job. A URL or a caller's pool
// that asks for another level is refused; READ UNCOMMITTED, which PostgreSQL
// runs as READ COMMITTED, is not.
func TestIsolationOtherThanReadCommittedIsRefused(t *testing.T) {
	ctx := context.Background()
	base := testdb.PostgresURL(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("default_transaction_isolation", "repeatable read")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads no + as a space
	_, err = pgdriver.New(ctx, u.String(), pgdriver.Options{})
	var ve *driver.ValidationError
	if !errors.As(err, &ve) || ve.Field != "database_url" || !strings.Contains(err.Error(), "read committed") {
		t.Errorf("New with default_transaction_isolation=repeatable read: %v, want a ValidationError on database_url naming read committed", err)
	}

	pool := newPool(t, base, map[string]string{"default_transaction_isolation": "serializable"})
	if _, err := pgdriver.NewFromPool(ctx, pool, pgdriver.Options{}); !errors.Is(err, driver.ErrInvalidArgument) || !strings.Contains(err.Error(), "read committed") {
		t.Errorf("NewFromPool on a serializable pool: %v, want an ErrInvalidArgument naming read committed", err)
	}

	q.Set("default_transaction_isolation", "READ UNCOMMITTED")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	d, err := pgdriver.New(ctx, u.String(), pgdriver.Options{})
	if err != nil {
		t.Fatalf("New with default_transaction_isolation=READ UNCOMMITTED: %v, want it taken (PostgreSQL runs it as read committed)", err)
	}
	_ = d.Close()
}

// A database whose default isolation is REPEATABLE READ (ALTER DATABASE … SET):
// New refuses it, saying how to ask for READ COMMITTED in the URL; asked so,
// concurrent claims, and a batch of completions that waits for a row a
// heartbeat then changes, do what they do on a default database. (The DLQ
// requeue also asks for READ COMMITTED in its own transaction.)
func TestReadCommittedOverADatabaseDefault(t *testing.T) {
	ctx := context.Background()
	rr := repeatableReadDatabase(t)
	_, err := pgdriver.New(ctx, rr, pgdriver.Options{})
	var ve *driver.ValidationError
	if !errors.As(err, &ve) || ve.Field != "database_url" || !strings.Contains(err.Error(), "default_transaction_isolation=read%20committed") {
		t.Fatalf("New on a database whose default is repeatable read: %v, want a ValidationError on database_url saying what to add", err)
	}
	d := openURL(t, rr+"&default_transaction_isolation=read%20committed")
	var iso string
	if err := d.Pool().QueryRow(ctx, "SHOW transaction_isolation").Scan(&iso); err != nil || iso != "read committed" {
		t.Fatalf("transaction_isolation = %q, %v; want read committed", iso, err)
	}

	t.Run("ConcurrentClaims", func(t *testing.T) {
		const jobs, claimers = 200, 4
		insertWaiting(t, d, jobs)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		claimed := map[int64]int{}
		for range claimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					js, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "w", LeaseDuration: time.Minute, Start: true})
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					}
					for _, j := range js {
						claimed[j.ID]++
					}
					mu.Unlock()
					if err == nil && len(js) == 0 {
						return
					}
				}
			}()
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Errorf("%d claims failed, e.g. %v", len(errs), errs[0])
		}
		if len(claimed) != jobs {
			t.Errorf("%d jobs claimed, want %d", len(claimed), jobs)
		}
		for id, n := range claimed {
			if n != 1 {
				t.Errorf("job %d claimed %d times", id, n)
			}
		}
	})

	t.Run("CompletionsWaitingForAHeartbeat", func(t *testing.T) {
		insertWaiting(t, d, 3)
		js, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 3, Owner: "w", LeaseDuration: time.Minute, Start: true})
		if err != nil || len(js) != 3 {
			t.Fatalf("claim: %d jobs, %v", len(js), err)
		}
		tx, err := d.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		// What the holder's own heartbeat of the middle job writes, in flight.
		if _, err := tx.Exec(ctx, "UPDATE drover_jobs SET lease_expires_at = now() + interval '1 minute', rev = rev + 1 WHERE id = $1", js[1].ID); err != nil {
			t.Fatal(err)
		}
		ps := make([]driver.CompleteParams, len(js))
		for i, j := range js {
			ps[i] = driver.CompleteParams{FenceParams: fenceOf(j), Result: []byte(`null`)}
		}
		done := make(chan []error, 1)
		go func() { done <- d.JobCompleteManyErrs(ctx, ps) }()
		waitBlocked(t, d, "Many completions in one statement", backendPID(t, tx))
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		for i, err := range <-done {
			if err != nil {
				t.Errorf("completion of job %d: %v", js[i].ID, err)
			}
		}
	})
}

// newPool opens a pool of the caller's own on url with these startup
// parameters, closed at the end of t.
func newPool(t *testing.T, url string, params map[string]string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// repeatableReadDatabase creates a database whose default isolation is
// REPEATABLE READ, dropped at the end of t, and returns its URL, which has a
// query string.
func repeatableReadDatabase(t *testing.T) string {
	t.Helper()
	return databaseWith(t, "default_transaction_isolation", "repeatable read", "transaction_isolation")
}

// databaseWith creates a database whose sessions default to value for setting
// (ALTER DATABASE … SET), dropped at the end of t, checks that a plain session
// shows it as shown, and returns its URL, which has a query string.
func databaseWith(t *testing.T, setting, value, shown string) string {
	t.Helper()
	ctx := context.Background()
	base := testdb.PostgresURL(t)
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "drover_set_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+name+" SET "+setting+" = '"+value+"'"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path") // a fresh database: its public schema
	u.RawQuery = q.Encode()

	// The database's default holds for a session that does not override it.
	c, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	var got string
	err = c.QueryRow(ctx, "SHOW "+shown).Scan(&got)
	c.Close(ctx)
	if err != nil || got != value {
		t.Fatalf("a plain session on %s: %s %q, %v; want %q", name, shown, got, err, value)
	}

	return u.String()
}

func fenceOf(j *driver.Job) driver.FenceParams {
	return driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken}
}
