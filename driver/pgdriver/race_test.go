package pgdriver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/lifecycle"
)

// waitBlocked waits until n backends running a statement that contains marker
// wait for a lock that holder (a backend pid) holds, or that a backend waiting
// for holder holds: the tests of other packages share the server.
func waitBlocked(t *testing.T, d *pgdriver.Driver, marker string, holder int, n ...int) {
	t.Helper()
	want := 1
	if len(n) > 0 {
		want = n[0]
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var got int
		if err := d.Pool().QueryRow(context.Background(), `
			SELECT count(*) FROM pg_stat_activity a
			WHERE a.wait_event_type = 'Lock' AND position($1 in a.query) > 0
			  AND ($2 = ANY (pg_blocking_pids(a.pid)) OR EXISTS (
			      SELECT 1 FROM unnest(pg_blocking_pids(a.pid)) b(pid) WHERE $2 = ANY (pg_blocking_pids(b.pid))))`,
			marker, holder).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("fewer than %d backends are waiting, behind backend %d, for a lock in a statement with %q", want, holder, marker)
}

// backendPID is the pid of the backend running tx.
func backendPID(t *testing.T, tx pgx.Tx) int {
	t.Helper()
	var pid int
	if err := tx.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// holdJobRow locks job id's row in a transaction of its own, held until the
// test ends (or the caller rolls it back), and returns that transaction and
// its backend's pid, so that a call under test can be seen waiting for it.
func holdJobRow(t *testing.T, d *pgdriver.Driver, id int64) (pgx.Tx, int) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "SELECT 1 FROM drover_jobs WHERE id = $1 FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	return tx, backendPID(t, tx)
}

// A cancel that waits for the job's lock while another transition (a claim, a
// snooze) commits still cancels the job, which is not terminal: before, the
// statement's UPDATE read the job as of before that commit, matched nothing and
// the cancel was refused as an invalid transition while the job ran on. The
// snooze's new ready row goes with the cancel.
func TestCancelWaitingForATransitionStillCancels(t *testing.T) {
	for _, racing := range []string{"claim", "snooze"} {
		t.Run(racing, func(t *testing.T) {
			ctx := context.Background()
			d := open(t)
			insertWaiting(t, d, 1)
			var id int64
			var fence driver.FenceParams
			if racing == "snooze" {
				jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "w", Start: true})
				if err != nil || len(jobs) != 1 {
					t.Fatal(jobs, err)
				}
				id, fence = jobs[0].ID, driver.FenceParams{ID: jobs[0].ID, Attempt: jobs[0].Attempt, LeaseToken: jobs[0].LeaseToken}
			} else if err := d.Pool().QueryRow(ctx, "SELECT id FROM drover_jobs").Scan(&id); err != nil {
				t.Fatal(err)
			}
			// Hold the job's row so that both calls queue behind it, the racing one first.
			tx, holder := holdJobRow(t, d, id)
			raced := make(chan error, 1)
			go func() {
				var err error
				if racing == "claim" {
					_, err = d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "w"})
				} else {
					_, err = d.JobSnooze(ctx, driver.SnoozeParams{FenceParams: fence, Delay: time.Hour})
				}
				raced <- err
			}()
			if racing == "claim" {
				waitBlocked(t, d, "drover_ready", holder)
			} else {
				waitBlocked(t, d, "'snoozed'", holder)
			}
			type answer struct {
				j   *driver.Job
				err error
			}
			canceled := make(chan answer, 1)
			go func() {
				j, err := d.JobCancel(ctx, driver.CancelParams{ID: id})
				canceled <- answer{j, err}
			}()
			waitBlocked(t, d, "'canceled'", holder)
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-raced; err != nil {
				t.Fatalf("the racing %s: %v", racing, err)
			}
			got := <-canceled
			cur, err := d.JobGet(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.err != nil || got.j == nil || got.j.Status != lifecycle.StatusCanceled || cur.Status != lifecycle.StatusCanceled {
				t.Fatalf("cancel racing a %s = %v, %v; job is %s, want canceled", racing, got.j, got.err, cur.Status)
			}
			evs, err := d.JobEvents(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			last := evs[len(evs)-1]
			want := map[string]lifecycle.Status{"claim": lifecycle.StatusClaimed, "snooze": lifecycle.StatusQueued}[racing]
			if last.Type != "canceled" || last.From != want || last.Seq != cur.Rev {
				t.Errorf("last event = %+v, want canceled from %s at seq %d", last, want, cur.Rev)
			}
			if err := d.CheckInvariants(ctx); err != nil {
				t.Error(err)
			}
		})
	}
}

// A repeat of a claim request sent while the first call still runs (a client's
// retry after a timeout) waits for it and answers its jobs; before, both calls
// saw no claim of the request yet and each claimed jobs of its own.
func TestClaimRepeatedWhileTheFirstRunsReplaysIt(t *testing.T) {
	ctx := context.Background()
	d := open(t)
	insertWaiting(t, d, 2)
	// Hold the first job's row so that the first call stops inside its claim.
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var first int64
	if err := tx.QueryRow(ctx, "SELECT id FROM drover_jobs ORDER BY id LIMIT 1 FOR UPDATE").Scan(&first); err != nil {
		t.Fatal(err)
	}
	holder := backendPID(t, tx)
	// The request's lock is counted below across the whole server, where other
	// packages' tests claim at the same time: its key must be this test's own.
	reqID := fmt.Sprintf("claim-repeat-%d", time.Now().UnixNano())
	p := driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "w", RequestID: reqID}
	type answer struct {
		jobs []*driver.Job
		err  error
	}
	// One channel per call: the repeat may answer before the first call's
	// goroutine gets to send.
	firstCall, repeat := make(chan answer, 1), make(chan answer, 1)
	go func() { j, err := d.JobClaim(ctx, p); firstCall <- answer{j, err} }()
	waitBlocked(t, d, "drover_ready", holder)
	go func() { j, err := d.JobClaim(ctx, p); repeat <- answer{j, err} }()
	waitBlocked(t, d, "pg_advisory_lock", holder)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := <-firstCall, <-repeat
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	if len(a.jobs) != 1 || len(b.jobs) != 1 || a.jobs[0].ID != first || b.jobs[0].ID != first || !b.jobs[0].Replayed {
		t.Errorf("first call %v, its repeat %v: want job %d claimed once and the repeat replayed", a.jobs, b.jobs, first)
	}
	var leased int
	if err := d.Pool().QueryRow(ctx, "SELECT count(*) FROM drover_jobs WHERE status IN ('claimed','running')").Scan(&leased); err != nil {
		t.Fatal(err)
	}
	if leased != 1 {
		t.Errorf("one claim request of limit 1 leased %d jobs", leased)
	}
	var locks int
	if err := d.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 6579052 AND objsubid = 2
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND objid::bigint = hashtext($1)::bigint & 4294967295`, reqID).Scan(&locks); err != nil {
		t.Fatal(err)
	}
	if locks != 0 {
		t.Errorf("%d advisory locks still held after both calls", locks)
	}
}

// Two calls of one heartbeat request in flight at once (a retry after a lost
// answer) both pass the guard, since a heartbeat leaves the status as it is; the
// second's event then repeats the request_id. It is answered as a repeat, not
// with the unique violation.
func TestHeartbeatRepeatedWhileTheFirstRunsIsAReplay(t *testing.T) {
	ctx := context.Background()
	d := open(t)
	insertWaiting(t, d, 1)
	jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "w", Start: true})
	if err != nil || len(jobs) != 1 {
		t.Fatal(jobs, err)
	}
	j := jobs[0]
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM drover_jobs WHERE id = $1 FOR UPDATE", j.ID); err != nil {
		t.Fatal(err)
	}
	holder := backendPID(t, tx)
	hp := driver.HeartbeatParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken,
		RequestID: "hb-1", LeaseDuration: time.Minute}}
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := d.JobHeartbeat(ctx, hp); errs <- err }()
	}
	waitBlocked(t, d, "'heartbeat'", holder, 2)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("a call of heartbeat request %q: %v", hp.RequestID, err)
		}
	}
	cur, err := d.JobGet(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Rev != j.Rev+1 {
		t.Errorf("rev %d after one heartbeat request from rev %d, want one bump", cur.Rev, j.Rev)
	}
}
