package pgdriver_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/internal/testdb"
)

// Close ends the driver's wake-up subscriptions, as the SQLite driver's
// does: it closes their channels and their LISTEN connections. Those
// connections are the driver's own, not the pool's, and outlived it: a
// subscription whose context did not end (a wake-up transport over the
// driver, a server, a worker never stopped) kept its connection and its
// goroutine after Close, for good, and opened a new connection to the
// database, from a closed driver, whenever that one was lost.
func TestCloseEndsWakeupSubscriptions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app := "drover_close_" + strings.ToLower(rand.Text()[:10])
	url := testdb.PostgresURL(t) + "&application_name=" + app
	if !strings.Contains(url, "?") {
		t.Fatalf("unexpected test URL %q", url)
	}
	conn := testdb.Connect(ctx, t)
	defer conn.Close(context.Background())
	listeners := func() int {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %'", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	d, err := pgdriver.New(ctx, url, pgdriver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	// Contexts that never end, as a long-lived subscriber's.
	subs := make([]<-chan string, 2)
	for i := range subs {
		if subs[i], err = d.WakeupSubscribe(context.Background()); err != nil {
			t.Fatal(err)
		}
		awaitWakeup(ctx, t, d, subs[i], "probe", "", true)
	}
	if n := listeners(); n != len(subs) {
		t.Fatalf("%d LISTEN connections before Close, want %d", n, len(subs))
	}

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for i, sub := range subs {
		timeout := time.After(10 * time.Second)
	drain:
		for {
			select {
			case _, open := <-sub:
				if !open {
					break drain
				}
			case <-timeout:
				t.Fatalf("subscription %d: its channel is still open 10s after Close", i)
			}
		}
	}
	// Its channel closes once its connection is closed.
	for deadline := time.Now().Add(10 * time.Second); listeners() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d LISTEN connections of the driver still open 10s after Close", listeners())
		}
	}
}
