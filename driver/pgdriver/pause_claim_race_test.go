package pgdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
)

// A pause of a queue takes effect for claims already under way: QueuePause
// returns only once every claim of the queue whose statement read the queue
// unpaused has committed, so no job of the queue is claimed after it returns.
// Before, a claim whose statement began before the pause committed, and then
// waited for a job's row (here another transaction holds it; in a busy
// database the statement only needs to run on while the pause commits), still
// claimed the job once it went on, after QueuePause had returned: a worker
// started a job of a queue its operator had paused. Each kind of claim: of one
// queue, of several, by id.
func TestPauseWaitsForClaimsInFlight(t *testing.T) {
	for _, how := range []string{"queue", "queues", "id"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d := open(t)
			insertWaiting(t, d, 1)
			var id int64
			if err := d.Pool().QueryRow(ctx, "SELECT id FROM drover_jobs").Scan(&id); err != nil {
				t.Fatal(err)
			}
			// Hold the job's row, so that the claim waits for it once its
			// statement has read the queue unpaused.
			tx, holder := holdJobRow(t, d, id)

			p := driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "w", Start: true}
			switch how {
			case "queues":
				p.Queues = []string{"q", "other"}
			case "id":
				p.Queues, p.ID = nil, id
			}
			type answer struct {
				jobs []*driver.Job
				err  error
			}
			claimed := make(chan answer, 1)
			go func() {
				jobs, err := d.JobClaim(ctx, p)
				claimed <- answer{jobs, err}
			}()
			waitBlocked(t, d, "drover_ready", holder)

			paused := make(chan error, 1)
			go func() { paused <- d.QueuePause(ctx, "q") }()
			// Either the pause returns, or it waits behind the claim (which
			// waits behind holder).
			pauseReturned := false
			deadline := time.Now().Add(10 * time.Second)
		wait:
			for {
				select {
				case err := <-paused:
					if err != nil {
						t.Fatal(err)
					}
					pauseReturned = true
					break wait
				default:
				}
				var behind bool
				if err := d.Pool().QueryRow(ctx, `
					SELECT EXISTS (SELECT 1 FROM pg_stat_activity a, pg_stat_activity c
					               WHERE $1 = ANY (pg_blocking_pids(c.pid)) AND c.pid = ANY (pg_blocking_pids(a.pid)))`,
					holder).Scan(&behind); err != nil {
					t.Fatal(err)
				}
				if behind {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("QueuePause neither returned nor waits for the claim in flight")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			got := <-claimed
			if got.err != nil {
				t.Fatal(got.err)
			}
			if !pauseReturned {
				if err := <-paused; err != nil {
					t.Fatal(err)
				}
			}
			if pauseReturned && len(got.jobs) > 0 {
				t.Fatalf("a claim in flight took job %d of queue q after QueuePause(q) had returned", got.jobs[0].ID)
			}
			// After the pause, nothing of q is claimed.
			if j, err := d.JobGet(ctx, id); err != nil {
				t.Fatal(err)
			} else if len(got.jobs) == 0 && j.Status != "queued" {
				t.Fatalf("job %d is %s, want queued", id, j.Status)
			}
			p.ID, p.Queues = 0, []string{"q"}
			if jobs, err := d.JobClaim(ctx, p); err != nil || len(jobs) != 0 {
				t.Fatalf("a claim of paused q = %d jobs, %v; want none", len(jobs), err)
			}
			if err := d.CheckInvariants(ctx); err != nil {
				t.Error(err)
			}
		})
	}
}
