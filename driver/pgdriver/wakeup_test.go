package pgdriver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
)

// awaitWakeup reads wake-ups from ch until one for want, failing t when ctx
// ends first or when early (if set) wakes before it. With again it publishes
// want every 250ms while none comes: LISTEN may start a moment after
// WakeupSubscribe returns.
func awaitWakeup(ctx context.Context, t *testing.T, d *pgdriver.Driver, ch <-chan string, want, early string, again bool) {
	t.Helper()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case q := <-ch:
			if q == early {
				t.Fatalf("%q woke before %q", early, want)
			}
			if q == want {
				return
			}
		case <-tick.C:
			if again {
				if err := d.WakeupPublish(ctx, []string{want}); err != nil {
					t.Fatalf("WakeupPublish: %v", err)
				}
			}
		case <-ctx.Done():
			t.Fatalf("no wake-up for %q", want)
		}
	}
}

// An enqueue on the pool sends its wake-up after its commit, in a statement of
// its own: a NOTIFY in the insert would serialize the commits of concurrent
// enqueues, WAL flushes included. One in the caller's transaction keeps the
// NOTIFY, which PostgreSQL delivers when that transaction commits.
func TestInsertNotifiesOnlyInTheCallersTransaction(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		if strings.Contains(pgdriver.InsertSQL(keyed, false), "pg_notify") {
			t.Errorf("the pool's insert (keyed %v) holds a NOTIFY", keyed)
		}
		if !strings.Contains(pgdriver.InsertSQL(keyed, true), "pg_notify") {
			t.Errorf("the insert in a caller's transaction (keyed %v) holds no NOTIFY", keyed)
		}
		if got := strings.Contains(pgdriver.InsertSQL(keyed, true), "ON CONFLICT"); got != keyed {
			t.Errorf("keyed %v: the statement has ON CONFLICT = %v", keyed, got)
		}
	}
}

// A job enqueued in the caller's transaction wakes its queue when that
// transaction commits, not before; one enqueued on the pool wakes it too.
func TestInsertWakeUpsFollowCommits(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := d.WakeupSubscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(q string) {
		if err := d.WakeupPublish(ctx, []string{q}); err != nil {
			t.Fatal(err)
		}
	}
	await := func(want, early string, again bool) {
		t.Helper()
		awaitWakeup(ctx, t, d, ch, want, early, again)
	}
	publish("probe") // LISTEN may start a moment after WakeupSubscribe returns
	await("probe", "", true)

	job := func(queue string) []driver.InsertParams {
		return []driver.InsertParams{{Kind: "k", Queue: queue, Args: []byte(`{}`), MaxAttempts: 1}}
	}
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := d.JobInsertManyTx(ctx, tx, job("in_tx")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.JobInsertMany(ctx, job("on_pool")); err != nil {
		t.Fatal(err)
	}
	await("on_pool", "in_tx", false)
	publish("marker")
	await("marker", "in_tx", false)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	await("in_tx", "", false)
}
