package maintenance_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/maintenance"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not synchronising on time
	}
}

func TestOneLeaderAndHandover(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			drv := testdb.Open(t, kind)
			var mu sync.Mutex
			leading := map[string]bool{}
			overlap := ""
			engines := make([]*maintenance.Engine, 3)
			cancels := make([]context.CancelFunc, 3)
			done := make([]chan struct{}, 3)
			for i := range engines {
				id := fmt.Sprintf("e%d", i)
				engines[i] = maintenance.New(drv, maintenance.Config{
					ID: id, LeaderTTL: 600 * time.Millisecond, ReapInterval: 20 * time.Millisecond,
					OnLeader: func(lead bool) {
						mu.Lock()
						defer mu.Unlock()
						if lead {
							for other, l := range leading {
								if l && other != id {
									overlap = fmt.Sprintf("%s became leader while %s led", id, other)
								}
							}
						}
						leading[id] = lead
					},
				})
				ctx, cancel := context.WithCancel(context.Background())
				cancels[i], done[i] = cancel, make(chan struct{})
				go func() { defer close(done[i]); engines[i].Run(ctx) }()
			}
			t.Cleanup(func() {
				for i := range cancels {
					cancels[i]()
					<-done[i]
				}
			})
			leader := func() int {
				n, who := 0, -1
				for i, e := range engines {
					if e.IsLeader() {
						n, who = n+1, i
					}
				}
				if n > 1 {
					t.Fatalf("%d engines lead at once", n)
				}
				return who
			}
			waitFor(t, "a leader", 5*time.Second, func() bool { return leader() >= 0 })
			first := leader()
			l, err := drv.LeaderGet(context.Background())
			if err != nil || l.ID != fmt.Sprintf("e%d", first) {
				t.Fatalf("LeaderGet = %+v, %v; want e%d", l, err, first)
			}

			// The leader's reaper requeues a job whose lease expired.
			res, err := drv.JobInsertMany(context.Background(), []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 3}})
			if err != nil {
				t.Fatal(err)
			}
			id := res[0].Job.ID
			if _, err := drv.JobClaim(context.Background(), driver.ClaimParams{Queues: []string{"q"}, Owner: "gone", LeaseDuration: 50 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the reaper to requeue the job", 5*time.Second, func() bool {
				j, err := drv.JobGet(context.Background(), id)
				return err == nil && j.Status == lifecycle.StatusQueued && j.Attempt == 1
			})

			// A leader that stops resigns, so a successor need not wait out the lease.
			cancels[first]()
			<-done[first]
			waitFor(t, "a successor", 5*time.Second, func() bool { w := leader(); return w >= 0 && w != first })
			mu.Lock()
			defer mu.Unlock()
			if overlap != "" {
				t.Fatal(overlap)
			}
		})
	}
}

// The leader walks the driver's repair steps: a claimable job that an older
// binary enqueued without its drover_ready row (a minute ago: younger ones wait
// for a later walk) is claimable again once the walk passes it.
func TestLeaderRepairsTheReadySet(t *testing.T) {
	t.Parallel()
	drv := testdb.Open(t, "postgres")
	if _, ok := drv.(driver.Repairer); !ok {
		t.Fatal("the PostgreSQL driver is no driver.Repairer")
	}
	ctx := context.Background()
	res, err := drv.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	pool := drv.(interface{ Pool() *pgxpool.Pool }).Pool()
	if _, err := pool.Exec(ctx, "DELETE FROM drover_ready WHERE id = $1", res[0].Job.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE drover_jobs SET created_at = created_at - interval '61 seconds' WHERE id = $1", res[0].Job.ID); err != nil {
		t.Fatal(err)
	}
	e := maintenance.New(drv, maintenance.Config{ID: "e", LeaderTTL: 600 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond})
	runEngine(t, e)
	waitFor(t, "the job to be claimable again", 10*time.Second, func() bool {
		var n int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM drover_ready WHERE id = $1", res[0].Job.ID).Scan(&n)
		return err == nil && n == 1
	})
	jobs, err := drv.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "w"})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim after the repair = %v, %v; want the job", jobs, err)
	}
}

// The leader folds the job counts' changes (migration 017) into the counts,
// so that QueueList reads a period's changes, not every statement's since the
// start.
func TestLeaderFoldsTheJobCounts(t *testing.T) {
	t.Parallel()
	drv := testdb.Open(t, "postgres")
	if _, ok := drv.(driver.CountFolder); !ok {
		t.Fatal("the PostgreSQL driver is no driver.CountFolder")
	}
	ctx := context.Background()
	if _, err := drv.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	pool := drv.(interface{ Pool() *pgxpool.Pool }).Pool()
	pending := func() int {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM drover_job_count_changes").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if pending() == 0 {
		t.Fatal("the insert appended no count change")
	}
	e := maintenance.New(drv, maintenance.Config{ID: "e", LeaderTTL: 600 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond})
	runEngine(t, e)
	waitFor(t, "the count changes to be folded", 10*time.Second, func() bool { return pending() == 0 })
	var n int
	if err := pool.QueryRow(ctx, "SELECT n FROM drover_job_counts WHERE queue = 'q' AND status = 'queued'").Scan(&n); err != nil || n != 1 {
		t.Errorf("folded count of q's queued jobs = %d, %v; want 1", n, err)
	}
}

// runEngine runs e until the end of t.
func runEngine(t *testing.T, e *maintenance.Engine) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// wakeupCounter counts the driver's wake-up publishes (NOTIFY on PostgreSQL).
type wakeupCounter struct {
	driver.Driver
	mu sync.Mutex
	n  int
}

func (d *wakeupCounter) WakeupPublish(ctx context.Context, queues []string) error {
	d.mu.Lock()
	d.n++
	d.mu.Unlock()
	return d.Driver.WakeupPublish(ctx, queues)
}

func (d *wakeupCounter) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// A wake-up transport that stops answering (a hung NATS server) must not stop
// the reconciler: each of its publishes gets one reconcile interval, and the
// database's wake-ups go on every pass. Before, a publish without a deadline held
// the loop until the transport gave up, minutes later.
func TestReconcilerGoesOnWhileATransportHangs(t *testing.T) {
	t.Parallel()
	drv := &wakeupCounter{Driver: testdb.Open(t, "sqlite")}
	ctx := context.Background()
	if _, err := drv.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	hung := make(chan struct{}, 100)
	e := maintenance.New(drv, maintenance.Config{
		ID: "e", LeaderTTL: 600 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond,
		Publish: func(ctx context.Context, queues []string) error {
			hung <- struct{}{}
			<-ctx.Done() // never answers
			return ctx.Err()
		},
	})
	runEngine(t, e)
	for range 5 { // five passes, each of which hung in the transport
		select {
		case <-hung:
		case <-time.After(10 * time.Second):
			t.Fatalf("the reconciler stopped after %d database wake-ups", drv.count())
		}
	}
	if n := drv.count(); n < 5 {
		t.Errorf("%d database wake-ups in five passes, want one a pass", n)
	}
}

// aheadClock is a driver reached from a host whose clock runs a day ahead of
// the database's: a retention cutoff the engine computed on its own clock
// arrives a day late. It signals each retention call after it returns.
type aheadClock struct {
	driver.Driver
	called chan driver.DeleteFinishedParams
}

func (d *aheadClock) JobDeleteFinished(ctx context.Context, p driver.DeleteFinishedParams) (int, error) {
	if !p.Before.IsZero() {
		p.Before = p.Before.Add(25 * time.Hour)
	}
	n, err := d.Driver.JobDeleteFinished(ctx, p)
	select {
	case d.called <- p:
	default:
	}
	return n, err
}

// Retention measures a job's age on the database's clock, which wrote its
// finished_at. It used the engine's own clock: on a host a day ahead, a payment
// job that had just succeeded was deleted, which freed its idempotency key, and
// enqueueing it again created a second job (helper-35's F1).
func TestRetentionAgeOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			drv := &aheadClock{Driver: testdb.Open(t, kind), called: make(chan driver.DeleteFinishedParams, 1)}
			res, err := drv.JobInsertMany(ctx, []driver.InsertParams{{Kind: "pay", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1, IdempotencyKey: "order-1"}})
			if err != nil {
				t.Fatal(err)
			}
			jobs, err := drv.JobClaim(ctx, driver.ClaimParams{ID: res[0].Job.ID, Owner: "w", LeaseDuration: time.Minute, Start: true})
			if err != nil || len(jobs) != 1 {
				t.Fatalf("claim: %v, %v", jobs, err)
			}
			j := jobs[0]
			if _, err := drv.JobComplete(ctx, driver.CompleteParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken}}); err != nil {
				t.Fatal(err)
			}

			e := maintenance.New(drv, maintenance.Config{ID: "e", LeaderTTL: 600 * time.Millisecond,
				Retention: 24 * time.Hour, RetentionInterval: 20 * time.Millisecond})
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); e.Run(rctx) }()
			t.Cleanup(func() { cancel(); <-done })
			var p driver.DeleteFinishedParams
			select {
			case p = <-drv.called:
			case <-time.After(10 * time.Second):
				t.Fatal("no retention pass within 10s")
			}
			if _, err := drv.JobGet(ctx, j.ID); err != nil {
				t.Errorf("the job that just succeeded, after a retention pass of %+v: %v; want it kept", p, err)
			}
			again, err := drv.JobInsertMany(ctx, []driver.InsertParams{{Kind: "pay", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1, IdempotencyKey: "order-1"}})
			if err != nil || !again[0].Existing || again[0].Job.ID != j.ID {
				t.Errorf("enqueue with the same idempotency key: %+v, %v; want job %d answered as existing", again, err, j.ID)
			}
		})
	}
}

// reapCounter passes the reaper's calls through and reports the running total
// of jobs reaped after each.
type reapCounter struct {
	driver.Driver
	mu    sync.Mutex
	total int
	calls chan int // the total after each call
}

func (d *reapCounter) JobReapExpired(ctx context.Context, p driver.ReapParams) ([]*driver.Job, error) {
	jobs, err := d.Driver.JobReapExpired(ctx, p)
	d.mu.Lock()
	d.total += len(jobs)
	total := d.total
	d.mu.Unlock()
	select {
	case d.calls <- total:
	default:
	}
	return jobs, err
}

// firstReapPass runs an engine on drv until the test ends, its next reap pass
// an hour after its first, and waits up to 10 s for the first pass to reap n
// jobs; it returns the jobs reaped by then and whether they reached n.
func firstReapPass(t *testing.T, ctx context.Context, drv *reapCounter, n int) (int, bool) {
	t.Helper()
	e := maintenance.New(drv, maintenance.Config{ID: "e", LeaderTTL: 10 * time.Second, ReapInterval: time.Hour,
		ReconcileInterval: time.Hour, Retention: -1})
	runEngine(t, e)
	got := 0
	timeout := time.After(10 * time.Second)
	for got < n {
		select {
		case got = <-drv.calls:
		case <-timeout:
			return got, false
		}
	}
	return got, true
}

// One reap pass reaps every expired lease, however many claims took the jobs.
// The PostgreSQL driver reads at most 100 due drover_leases rows a call (one
// row per claim), so when every job was claimed on its own (a remote worker's
// claim is of one task, a busy worker claims as single slots free up), a call
// answers 100 jobs, fewer than the reaper's limit of 1,000, and the pass ended
// there: a crashed fleet's 300 jobs took three reap intervals to requeue, 100k
// jobs a thousand.
func TestReapPassReapsEveryExpiredLease(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			drv := &reapCounter{Driver: testdb.Open(t, kind), calls: make(chan int, 100)}
			const n = 300
			past := time.Now().Add(-time.Hour)
			params := make([]driver.InsertParams, n)
			for i := range params {
				params[i] = driver.InsertParams{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 3, RunAt: &past}
			}
			if _, err := drv.JobInsertMany(ctx, params); err != nil {
				t.Fatal(err)
			}
			// Each job claimed on its own, an hour ago, for a minute: every
			// lease expired long since, each under a claim of its own.
			for i := range n {
				jobs, err := drv.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "gone",
					LeaseDuration: time.Minute, Start: true, Now: &past})
				if err != nil || len(jobs) != 1 {
					t.Fatalf("claim %d: %v, %v", i, jobs, err)
				}
			}
			if got, ok := firstReapPass(t, ctx, drv, n); !ok {
				t.Fatalf("the first reap pass requeued %d of %d expired jobs; the rest wait for the next pass, an hour later", got, n)
			}
			var left int
			for after := int64(0); ; {
				page, err := drv.JobList(ctx, driver.ListParams{AfterID: after, Limit: 1000, Ascending: true})
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range page {
					if j.Status != lifecycle.StatusQueued {
						left++
					}
				}
				if len(page) < 1000 {
					break
				}
				after = page[len(page)-1].ID
			}
			if left != 0 {
				t.Errorf("%d jobs not requeued after the pass", left)
			}
		})
	}
}

// hungElection passes elections through until hang is set; from then on each
// waits for its context to end, as a call to a database that stopped
// answering does. last is when the last election that went through was asked.
type hungElection struct {
	driver.Driver
	mu   sync.Mutex // held over an election that goes through, so hang and last agree
	hang bool
	last time.Time
	won  chan struct{}
}

func (d *hungElection) LeaderAttemptElect(ctx context.Context, p driver.LeaderParams) (bool, error) {
	d.mu.Lock()
	if d.hang {
		d.mu.Unlock()
		<-ctx.Done()
		return false, ctx.Err()
	}
	defer d.mu.Unlock()
	asked := time.Now()
	lead, err := d.Driver.LeaderAttemptElect(ctx, p)
	if err == nil && lead {
		d.last = asked
		select {
		case d.won <- struct{}{}:
		default:
		}
	}
	return lead, err
}

// leadThenHang runs an engine of cfg (its ID and timings set here) over drv
// until the test ends, waits for it to lead, and then makes every election
// hang; it answers the engine and when the last election that went through
// was asked.
func leadThenHang(t *testing.T, drv *hungElection, ttl time.Duration, cfg maintenance.Config) (*maintenance.Engine, time.Time) {
	t.Helper()
	cfg.ID, cfg.LeaderTTL, cfg.ReapInterval, cfg.ReconcileInterval, cfg.Retention = "e", ttl, time.Hour, time.Hour, -1
	e := maintenance.New(drv, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-drv.won:
	case <-time.After(10 * time.Second):
		t.Fatal("the engine did not become leader")
	}
	waitFor(t, "IsLeader", 5*time.Second, e.IsLeader)
	drv.mu.Lock()
	defer drv.mu.Unlock()
	drv.hang = true
	return e, drv.last
}

// IsLeader says false once the leadership is no longer trusted, however long
// the election call under way takes to fail. It answered from the flag the
// election loop sets, which a hung call (up to a third of the TTL) and the
// candidate's retry kept true past the lease the database granted, when a
// successor may already lead; /healthz reported two leaders then.
func TestIsLeaderEndsWithTheTrustedLease(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			const ttl = 3 * time.Second
			drv := &hungElection{Driver: testdb.Open(t, kind), won: make(chan struct{}, 1)}
			e, last := leadThenHang(t, drv, ttl, maintenance.Config{})
			// The lease granted by the last election asked for at last ends by
			// last + ttl; no election has gone through since.
			time.Sleep(time.Until(last.Add(ttl))) // the point in time the assertion is about
			if e.IsLeader() {
				t.Fatalf("IsLeader() = true %s after the last election that went through, past the lease it granted (%s)",
					time.Since(last).Round(time.Millisecond), ttl)
			}
		})
	}
}

// OnLeader(false) comes once the leadership is no longer trusted, within the
// lease the last election that went through granted, however long the
// election call under way would take to fail: a call to a database that
// stopped answering ran for up to a third of the TTL, and OnLeader(false)
// came after the lease had ended, when a successor may already lead.
func TestOnLeaderFalseWithinTheTrustedLease(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			const ttl = 3 * time.Second
			drv := &hungElection{Driver: testdb.Open(t, kind), won: make(chan struct{}, 1)}
			lost := make(chan time.Time, 1)
			_, last := leadThenHang(t, drv, ttl, maintenance.Config{OnLeader: func(lead bool) {
				if !lead {
					select {
					case lost <- time.Now():
					default:
					}
				}
			}})
			select {
			case at := <-lost:
				// Trust ends TTL/10 before the lease; half of that is left
				// for the callback's scheduling.
				if after := at.Sub(last); after >= ttl-ttl/20 {
					t.Errorf("OnLeader(false) came %s after the last election that went through, want it before %s (the trust ends at %s, the lease at %s)",
						after.Round(time.Millisecond), ttl-ttl/20, ttl-ttl/10, ttl)
				}
			case <-time.After(2 * ttl):
				t.Fatal("no OnLeader(false) within two TTLs of the database hanging")
			}
		})
	}
}

// passCounter passes the reaper's calls through and signals the end of each
// pass: a call that reaps nothing.
type passCounter struct {
	driver.Driver
	passEnd chan struct{}
}

func (d *passCounter) JobReapExpired(ctx context.Context, p driver.ReapParams) ([]*driver.Job, error) {
	jobs, err := d.Driver.JobReapExpired(ctx, p)
	if err == nil && len(jobs) == 0 {
		select {
		case d.passEnd <- struct{}{}:
		default:
		}
	}
	return jobs, err
}

// A reap pass reaches an expired lease however many claims whose jobs all
// finished became due before it. On PostgreSQL every claim writes a
// drover_leases row, and a call tidied 1,000 such rows and then read the next
// 100 due rows for expired jobs: behind more than 1,100 finished single-job
// claims (a second of claims at that rate), it read only finished ones,
// reaped nothing, and the pass ended. A job lost to a crashed worker waited a
// pass per 1,000 such claims, for ever while claims came faster than that.
func TestReapPassReachesALeaseBehindFinishedClaims(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			drv := &passCounter{Driver: testdb.Open(t, kind), passEnd: make(chan struct{}, 1)}
			const n = 1200
			past := time.Now().Add(-time.Hour)
			runAt := past.Add(-time.Hour)
			params := make([]driver.InsertParams, n)
			for i := range params {
				params[i] = driver.InsertParams{Kind: "k", Queue: "done", Args: []byte(`{}`), MaxAttempts: 3, RunAt: &runAt}
			}
			params = append(params, driver.InsertParams{Kind: "k", Queue: "lost", Args: []byte(`{}`), MaxAttempts: 3, RunAt: &runAt})
			if _, err := drv.JobInsertMany(ctx, params); err != nil {
				t.Fatal(err)
			}
			// An hour ago, n claims of one job each, for a minute, and every
			// job completed.
			done := make([]driver.CompleteParams, 0, n)
			for i := range n {
				jobs, err := drv.JobClaim(ctx, driver.ClaimParams{Queues: []string{"done"}, Limit: 1, Owner: "w",
					LeaseDuration: time.Minute, Start: true, Now: &past})
				if err != nil || len(jobs) != 1 {
					t.Fatalf("claim %d: %v, %v", i, jobs, err)
				}
				j := jobs[0]
				done = append(done, driver.CompleteParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, Now: &past}})
			}
			for len(done) > 0 {
				chunk := done[:min(len(done), 500)]
				done = done[len(chunk):]
				for _, err := range drv.JobCompleteManyErrs(ctx, chunk) {
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			// A second later, a job whose worker died: its lease expired
			// after all of theirs.
			later := past.Add(time.Second)
			lost, err := drv.JobClaim(ctx, driver.ClaimParams{Queues: []string{"lost"}, Limit: 1, Owner: "dead",
				LeaseDuration: time.Minute, Start: true, Now: &later})
			if err != nil || len(lost) != 1 {
				t.Fatalf("claim the lost job: %v, %v", lost, err)
			}
			// One pass: the next is an hour away.
			e := maintenance.New(drv, maintenance.Config{ID: "e", LeaderTTL: 10 * time.Second, ReapInterval: time.Hour,
				ReconcileInterval: time.Hour, Retention: -1})
			rctx, cancel := context.WithCancel(ctx)
			ended := make(chan struct{})
			go func() { defer close(ended); e.Run(rctx) }()
			t.Cleanup(func() { cancel(); <-ended })
			select {
			case <-drv.passEnd:
			case <-time.After(20 * time.Second):
				t.Fatal("no reap pass ended within 20s")
			}
			j, err := drv.JobGet(ctx, lost[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if j.Status != lifecycle.StatusQueued {
				t.Errorf("after a reap pass, the job whose lease expired an hour ago is %s (attempt %d, lease until %v), want queued; %d finished claims' leases were due before it",
					j.Status, j.Attempt, j.LeaseExpiresAt, n)
			}
		})
	}
}
