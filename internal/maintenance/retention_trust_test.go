package maintenance_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/maintenance"
	"github.com/drover-dev/drover/internal/testdb"
)

// stalledLeader passes elections through until stall is set; from then on an
// election waits, whatever its context, until release is closed: the
// election loop of a leader stalled (a GC pause, SIGSTOP) and resumed, whose
// other goroutines run before it. Its first retention call waits, after it
// returns, until the engine no longer trusts its leadership; later calls are
// counted in late.
type stalledLeader struct {
	driver.Driver
	e        *maintenance.Engine
	release  chan struct{}
	mu       sync.Mutex
	stall    bool
	calls    int
	late     int           // retention calls made once the leadership was no longer trusted
	lateCall chan struct{} // signalled after each
}

func (d *stalledLeader) LeaderAttemptElect(ctx context.Context, p driver.LeaderParams) (bool, error) {
	d.mu.Lock()
	stall := d.stall
	d.mu.Unlock()
	if stall {
		<-d.release
		return false, context.Canceled
	}
	return d.Driver.LeaderAttemptElect(ctx, p)
}

func (d *stalledLeader) JobDeleteFinished(ctx context.Context, p driver.DeleteFinishedParams) (int, error) {
	d.mu.Lock()
	d.calls++
	first := d.calls == 1
	late := !first && !d.e.IsLeader()
	if late {
		d.late++
	}
	d.stall = true
	d.mu.Unlock()
	n, err := d.Driver.JobDeleteFinished(ctx, p)
	if late {
		select {
		case d.lateCall <- struct{}{}:
		default:
		}
	}
	if first {
		for d.e.IsLeader() { // no signal marks the end of the trust
			time.Sleep(5 * time.Millisecond)
		}
	}
	return n, err
}

// Retention stops between its batches once the engine no longer trusts its
// leadership, as the reaper does between its calls: a successor may lead by
// then and run its own. A leader whose election loop stalled while a
// retention pass ran went on deleting batch after batch past the lease it
// last extended, with its own retention age, which need not be the
// successor's (a rolling deploy that raised it).
func TestRetentionStopsWhenTheLeadershipIsNoLongerTrusted(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			drv := &stalledLeader{Driver: testdb.Open(t, kind), release: make(chan struct{}), lateCall: make(chan struct{}, 1)}
			// 2,100 jobs that finished two days ago: three retention calls
			// of up to 1,000.
			const n = 2100
			past := time.Now().Add(-48 * time.Hour)
			params := make([]driver.InsertParams, n)
			for i := range params {
				params[i] = driver.InsertParams{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1, RunAt: &past}
			}
			if _, err := drv.JobInsertMany(ctx, params); err != nil {
				t.Fatal(err)
			}
			for left := n; left > 0; {
				jobs, err := drv.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 500, Owner: "w",
					LeaseDuration: time.Minute, Start: true, Now: &past})
				if err != nil || len(jobs) == 0 {
					t.Fatalf("claim: %d jobs, %v", len(jobs), err)
				}
				done := make([]driver.CompleteParams, len(jobs))
				for i, j := range jobs {
					done[i] = driver.CompleteParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken, Now: &past}}
				}
				for _, err := range drv.JobCompleteManyErrs(ctx, done) {
					if err != nil {
						t.Fatal(err)
					}
				}
				left -= len(jobs)
			}
			e := maintenance.New(drv, maintenance.Config{ID: "e", LeaderTTL: 600 * time.Millisecond, ReapInterval: time.Hour,
				ReconcileInterval: time.Hour, Retention: 24 * time.Hour, RetentionInterval: time.Hour})
			drv.e = e
			rctx, cancel := context.WithCancel(ctx)
			ended := make(chan struct{})
			go func() { defer close(ended); e.Run(rctx) }()
			t.Cleanup(func() { close(drv.release); cancel(); <-ended })
			waitFor(t, "a retention pass under way when the trust ends", 10*time.Second, func() bool {
				drv.mu.Lock()
				defer drv.mu.Unlock()
				return drv.calls > 0 && !e.IsLeader()
			})
			// A pass that goes on makes its next call as soon as the first
			// returns; the absence of one has no signal, so it gets a second.
			select {
			case <-drv.lateCall:
				drv.mu.Lock()
				defer drv.mu.Unlock()
				t.Errorf("retention made %d calls (%d in all) after the leadership was no longer trusted, want none", drv.late, drv.calls)
			case <-time.After(time.Second):
			}
		})
	}
}
