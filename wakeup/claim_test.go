package wakeup

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

// TestLostAndDuplicatePointersNeverLoseOrDoubleWork is the transport's reason to
// exist, shown with the driver directly: pointers are dropped, duplicated and left
// unacked (so redelivered), and still every job runs exactly once, because a
// receiver only ever claims, and the claim is decided by the job row.
func TestLostAndDuplicatePointersNeverLoseOrDoubleWork(t *testing.T) {
	t.Parallel()
	const (
		jobs      = 120
		consumers = 4
		queue     = "work.items" // a dotted name, to exercise the subject encoding
	)
	var droppedAcks atomic.Int32
	tr := newTestNATS(t, NATSOptions{
		AckWait:          time.Second,
		DropPublish:      func(p Pointer) bool { return p.JobID%7 == 0 },
		DuplicatePublish: func(p Pointer) bool { return p.JobID%5 == 0 },
		DropAck: func(m Message) bool {
			return m.JobID%11 == 0 && droppedAcks.Add(1) <= jobs/11
		},
	})
	drv := testdb.Open(t, "sqlite")
	ctx := t.Context()

	params := make([]driver.InsertParams, jobs)
	for i := range params {
		params[i] = driver.InsertParams{Kind: "noop", Args: json.RawMessage(`{}`), Queue: queue, MaxAttempts: 3}
	}
	res, err := drv.JobInsertMany(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	ptrs := make([]Pointer, len(res))
	for i, r := range res {
		ptrs[i] = Pointer{Queue: queue, JobID: r.Job.ID}
	}

	var (
		done        atomic.Int64 // jobs completed
		emptyClaims atomic.Int64 // pointers whose claim found nothing: harmless duplicates
		allDone     = make(chan struct{})
		closeOnce   sync.Once
	)
	run := func(owner string, j *driver.Job) {
		fence := driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken}
		if _, err := drv.JobStart(ctx, fence); err != nil {
			t.Errorf("%s: start job %d: %v", owner, j.ID, err)
			return
		}
		if _, err := drv.JobComplete(ctx, driver.CompleteParams{FenceParams: fence}); err != nil {
			t.Errorf("%s: complete job %d: %v", owner, j.ID, err)
			return
		}
		if done.Add(1) == jobs {
			closeOnce.Do(func() { close(allDone) })
		}
	}
	claim := func(owner string, p driver.ClaimParams) ([]*driver.Job, error) {
		p.Owner, p.LeaseDuration = owner, time.Minute
		return drv.JobClaim(ctx, p)
	}

	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range consumers {
		owner := fmt.Sprintf("consumer-%d", i)
		ch, err := tr.Subscribe(stop, []string{queue})
		if err != nil {
			t.Fatal(err)
		}
		poll := time.NewTicker(100 * time.Millisecond) // the fallback every worker keeps
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer poll.Stop()
			for {
				select {
				case m, ok := <-ch:
					if !ok {
						return
					}
					got, err := claim(owner, driver.ClaimParams{ID: m.JobID, Limit: 1})
					if err != nil {
						t.Errorf("%s: claim job %d: %v", owner, m.JobID, err)
						continue // unacked: it comes back after AckWait
					}
					if len(got) == 0 {
						emptyClaims.Add(1)
					}
					for _, j := range got {
						run(owner, j)
					}
					_ = m.Ack() // after the claim attempt, whether or not it got the job
				case <-poll.C:
					got, err := claim(owner, driver.ClaimParams{Queues: []string{queue}, Limit: 10})
					if err != nil {
						t.Errorf("%s: poll: %v", owner, err)
						continue
					}
					for _, j := range got {
						run(owner, j)
					}
				}
			}
		}()
	}

	if err := tr.Publish(ctx, ptrs); err != nil {
		t.Fatal(err)
	}
	select {
	case <-allDone:
	case <-time.After(30 * time.Second):
		t.Fatalf("only %d of %d jobs completed within 30s", done.Load(), jobs)
	}
	cancel()
	wg.Wait()

	for _, r := range res {
		j, err := drv.JobGet(ctx, r.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != lifecycle.StatusSucceeded || j.Attempt != 1 {
			t.Errorf("job %d: status %s attempt %d, want succeeded at attempt 1", j.ID, j.Status, j.Attempt)
		}
		events, err := drv.JobEvents(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[lifecycle.EventType]int{}
		for _, e := range events {
			counts[e.Type]++
		}
		if counts[lifecycle.EventClaimed] != 1 || counts[lifecycle.EventSucceeded] != 1 {
			t.Errorf("job %d: %d claims and %d successes, want one of each", j.ID,
				counts[lifecycle.EventClaimed], counts[lifecycle.EventSucceeded])
		}
	}
	if done.Load() != jobs {
		t.Errorf("%d completions, want %d", done.Load(), jobs)
	}
	t.Logf("%d jobs done once each; %d pointers found their job already taken", jobs, emptyClaims.Load())
}
