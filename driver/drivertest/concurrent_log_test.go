package drivertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

// callRecord is one transition call of the concurrent test that carried a
// request_id, and how it was answered.
type callRecord struct {
	job      int64
	req      string
	op       string
	accepted bool // answered without error and not as a replay
	err      error
}

// TestConcurrentCallsLogExactlyTheAcceptedOnes runs claims, starts, heartbeats, completions,
// failures, snoozes, cancels, reaps, DLQ requeues and purges and retention at
// once on a few jobs, every lease-holder and operator call with a request_id of
// its own, and then checks that the log holds exactly the calls that were
// accepted: each accepted one once, no refused one.
func TestConcurrentCallsLogExactlyTheAcceptedOnes(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			d := testdb.Open(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var mu sync.Mutex
			var fences []driver.FenceParams
			var calls []callRecord
			seq := 0
			nextReq := func() string {
				mu.Lock()
				defer mu.Unlock()
				seq++
				return fmt.Sprintf("req-%d", seq)
			}
			record := func(c callRecord) {
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
			}
			pick := func(rng *rand.Rand) (driver.FenceParams, bool) {
				mu.Lock()
				defer mu.Unlock()
				if len(fences) == 0 {
					return driver.FenceParams{}, false
				}
				return fences[rng.IntN(len(fences))], true
			}
			const lease = 300 * time.Millisecond
			deadline := time.Now().Add(4 * time.Second)
			var wg sync.WaitGroup
			fail := make(chan error, 16)
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 11))
					for time.Now().Before(deadline) {
						switch op := rng.IntN(12); op {
						case 0:
							ps := []driver.InsertParams{{Kind: "k", Queue: "q", Args: json.RawMessage(`{}`), MaxAttempts: 1 + rng.IntN(3)}}
							if _, err := d.JobInsertMany(ctx, ps); err != nil {
								fail <- err
								return
							}
						case 1, 2:
							req := nextReq()
							jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 2, Owner: "w", LeaseDuration: lease,
								Start: rng.IntN(2) == 0, RequestID: req})
							if err != nil {
								fail <- err
								return
							}
							mu.Lock()
							for _, j := range jobs {
								fences = append(fences, driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken})
								calls = append(calls, callRecord{job: j.ID, req: req, op: "claim", accepted: true})
							}
							mu.Unlock()
						case 3, 4, 5, 6, 7, 8:
							f, ok := pick(rng)
							if !ok {
								continue
							}
							f.RequestID = nextReq()
							f.LeaseDuration = lease
							var j *driver.Job
							var err error
							name := ""
							switch op {
							case 3:
								name = "start"
								j, err = d.JobStart(ctx, f)
							case 4:
								name = "heartbeat"
								var r driver.HeartbeatResult
								r, err = d.JobHeartbeat(ctx, driver.HeartbeatParams{FenceParams: f})
								if err == nil && r.CancelRequested {
									err = errors.New("cancel requested")
								}
							case 5:
								name = "complete"
								j, err = d.JobComplete(ctx, driver.CompleteParams{FenceParams: f})
							case 6:
								name = "fail"
								j, err = d.JobFail(ctx, driver.FailParams{FenceParams: f, Error: "x", Permanent: rng.IntN(3) == 0})
							case 7:
								name = "snooze"
								j, err = d.JobSnooze(ctx, driver.SnoozeParams{FenceParams: f})
							case 8:
								name = "unclaim"
								j, err = d.JobUnclaim(ctx, f)
							}
							if err != nil && !errors.Is(err, driver.ErrLeaseLost) && !errors.Is(err, driver.ErrNotFound) && err.Error() != "cancel requested" {
								fail <- fmt.Errorf("%s: %w", name, err)
								return
							}
							record(callRecord{job: f.ID, req: f.RequestID, op: name, accepted: err == nil && (j == nil || !j.Replayed), err: err})
						case 9:
							f, ok := pick(rng)
							if !ok {
								continue
							}
							req := nextReq()
							j, err := d.JobCancel(ctx, driver.CancelParams{ID: f.ID, RequestID: req})
							if err != nil && !errors.Is(err, driver.ErrInvalidTransition) && !errors.Is(err, driver.ErrNotFound) {
								fail <- fmt.Errorf("cancel: %w", err)
								return
							}
							record(callRecord{job: f.ID, req: req, op: "cancel", accepted: err == nil && !j.Replayed, err: err})
						case 10:
							if _, err := d.JobReapExpired(ctx, driver.ReapParams{Limit: 100}); err != nil {
								fail <- err
								return
							}
						case 11:
							f, ok := pick(rng)
							if !ok {
								continue
							}
							var err error
							switch rng.IntN(4) {
							case 0:
								_, err = d.JobDLQRequeue(ctx, driver.DLQRequeueParams{ID: f.ID})
								if errors.Is(err, driver.ErrInvalidTransition) || errors.Is(err, driver.ErrNotFound) {
									err = nil
								}
							case 1:
								_, err = d.JobDeleteFinished(ctx, driver.DeleteFinishedParams{OlderThan: 500 * time.Millisecond, Limit: 5})
							case 2:
								if rng.IntN(10) == 0 {
									_, err = d.JobDLQPurge(ctx, driver.DLQPurgeParams{})
								}
							}
							if err != nil {
								fail <- err
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			close(fail)
			for err := range fail {
				t.Fatal(err)
			}
			byJob := map[int64][]callRecord{}
			for _, c := range calls {
				byJob[c.job] = append(byJob[c.job], c)
			}
			checked, accepted := 0, 0
			for id, cs := range byJob {
				j, err := d.JobGet(ctx, id)
				if errors.Is(err, driver.ErrNotFound) {
					continue // deleted by retention or a purge
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := lifecycle.CheckInvariants(j.State()); err != nil {
					t.Errorf("job %d: %v", id, err)
				}
				evs, err := d.JobEvents(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if err := lifecycle.CheckHistory(evs); err != nil {
					t.Errorf("job %d: %v", id, err)
				}
				if last := evs[len(evs)-1]; last.To != j.Status || last.Attempt != j.Attempt {
					t.Errorf("job %d is %s attempt %d, its last event %+v", id, j.Status, j.Attempt, last)
				}
				logged := map[string]int{}
				for _, e := range evs {
					if e.RequestID != "" {
						logged[e.RequestID]++
					}
				}
				checked++
				for _, c := range cs {
					n := logged[c.req]
					if c.accepted {
						accepted++
					}
					switch {
					case c.accepted && n != 1:
						t.Errorf("job %d: %s %s was accepted, but the log holds it %d times", id, c.op, c.req, n)
					case !c.accepted && n != 0:
						t.Errorf("job %d: %s %s was refused (%v), but the log holds it", id, c.op, c.req, c.err)
					}
				}
			}
			if c, ok := d.(interface{ CheckInvariants(context.Context) error }); ok {
				if err := c.CheckInvariants(ctx); err != nil {
					t.Error(err)
				}
			}
			t.Logf("%d calls, %d jobs checked, %d accepted calls on them", len(calls), checked, accepted)
			if checked == 0 || accepted == 0 {
				t.Fatal("nothing was checked")
			}
		})
	}
}
