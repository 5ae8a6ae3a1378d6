package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// lateListen is a replica's real driver whose wake-up subscription waits for
// listen to close before it LISTENs (a connection slow to open), and which
// tells claimed how many jobs each claim took.
type lateListen struct {
	driver.Driver
	subscribing, listen chan struct{}
	claimed             chan int
}

func (d *lateListen) WakeupSubscribe(ctx context.Context) (<-chan string, error) {
	close(d.subscribing)
	<-d.listen
	return d.Driver.WakeupSubscribe(ctx)
}

func (d *lateListen) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	jobs, err := d.Driver.JobClaim(ctx, p)
	d.claimed <- len(jobs)
	return jobs, err
}

// A replica's first long poll subscribes to wake-ups as it begins, and the
// LISTEN is set up while its first claim runs. A job enqueued through another
// replica after that claim and before the LISTEN sent its NOTIFY to nobody:
// the long poll slept until its one-second poll (every replica does this
// after each restart, and every worker long-polling it waits). The hub now
// wakes its waiters once its subscription is listening, and they claim again.
func TestLongPollWokenByAnEnqueueBeforeItsReplicaListens(t *testing.T) {
	ctx := context.Background()
	url := testdb.URL(t, "postgres")
	a := startReplica(t, url, nil, Config{})
	late := &lateListen{subscribing: make(chan struct{}), listen: make(chan struct{}), claimed: make(chan int, 10)}
	b := startReplica(t, url, func(d driver.Driver) driver.Driver { late.Driver = d; return late }, Config{})

	// The test's own LISTEN tells when replica A's NOTIFY has gone out.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{"drover_wakeup_" + schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}

	answer, failed := make(chan claimAnswer, 1), make(chan error, 1)
	go func() {
		ans, err := b.sendClaim(ctx, `{"worker_id":"w1","queues":["default"],"wait_seconds":10}`)
		if err != nil {
			failed <- err
			return
		}
		answer <- ans
	}()
	<-late.subscribing
	var n int
	select {
	case n = <-late.claimed:
	case err := <-failed:
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the long poll's first claim took %d jobs from an empty queue", n)
	}
	waiting := time.Now() // B's long poll waits from here: its next poll is a second away
	if code, body := a.post(ctx, t, "/jobs", `{"kind":"k"}`); code != http.StatusCreated {
		t.Fatalf("enqueue at replica A: %d %s", code, body)
	}
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := conn.WaitForNotification(nctx); err != nil {
		t.Fatalf("replica A's wake-up: %v", err)
	}
	close(late.listen) // replica B LISTENs only now
	var got claimAnswer
	select {
	case got = <-answer:
	case err := <-failed:
		t.Fatal(err)
	}
	took := time.Since(waiting)
	if len(got.Tasks) != 1 {
		t.Fatalf("the long poll answered %d tasks, want the job enqueued at replica A", len(got.Tasks))
	}
	if took >= time.Second {
		t.Errorf("the long poll at replica B took the job %v after it began to wait: its poll's, not a wake-up's", took.Round(time.Millisecond))
	}
}
