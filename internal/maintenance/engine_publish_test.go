package maintenance_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/maintenance"
	"github.com/drover-dev/drover/internal/testdb"
)

// resignSignal signals each LeaderResign after it returns.
type resignSignal struct {
	*wakeupCounter
	resigned chan struct{}
}

func (d *resignSignal) LeaderResign(ctx context.Context, id, token string) error {
	err := d.wakeupCounter.LeaderResign(ctx, id, token)
	d.resigned <- struct{}{}
	return err
}

// stuckTransport is a publish that ignores its context, as a user's transport
// or a client library stuck on a dead connection may: it blocks until the test
// releases it.
type stuckTransport struct {
	entered  chan struct{} // one send per call, when it starts
	release  chan struct{} // closed by the test
	inFlight atomic.Int32
	most     atomic.Int32 // the most calls in flight at once
	calls    atomic.Int32
}

func (s *stuckTransport) Publish(ctx context.Context, queues []string) error {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	s.calls.Add(1)
	s.entered <- struct{}{}
	<-s.release // the context is ignored
	return nil
}

// A transport publish that ignores its context may delay wake-ups through that
// transport, and nothing else: the reconciler's database wake-ups go on every
// pass, the engine shuts down and resigns at once, and no publish piles up
// behind the stuck one. Before, the reconcile loop sat in the publish for as
// long as it hung, and Run, which waits for the loops before it resigns, with
// it: a successor waited out the whole lease, and the database wake-ups that
// are the fallback for lost pointers stopped.
func TestStuckTransportPublishDelaysOnlyWakeups(t *testing.T) {
	t.Parallel()
	drv := &resignSignal{wakeupCounter: &wakeupCounter{Driver: testdb.Open(t, "sqlite")}, resigned: make(chan struct{}, 4)}
	ctx := context.Background()
	if _, err := drv.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	tr := &stuckTransport{entered: make(chan struct{}, 100), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(tr.release) }) }
	t.Cleanup(release)
	lost := make(chan struct{}, 1)
	e := maintenance.New(drv, maintenance.Config{
		ID: "e", LeaderTTL: 600 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond,
		Publish: tr.Publish,
		OnLeader: func(lead bool) {
			if !lead {
				lost <- struct{}{}
			}
		},
	})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.Run(rctx) }()
	t.Cleanup(func() { cancel(); release(); <-done })

	select {
	case <-tr.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the reconciler never published to the transport")
	}
	// The publish is stuck; the database wake-ups must go on, pass after pass.
	before := drv.count()
	for deadline := time.Now().Add(5 * time.Second); drv.count() < before+5; {
		if time.Now().After(deadline) {
			t.Errorf("%d database wake-ups in 5s while the transport publish was stuck, want one every 20ms pass", drv.count()-before)
			break
		}
		time.Sleep(10 * time.Millisecond) // polling a count, not synchronising on time
	}

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of its context ending while a transport publish was stuck")
	}
	select {
	case <-lost:
	default:
		t.Error("Run returned without OnLeader(false)")
	}
	select {
	case <-drv.resigned:
	default:
		t.Error("Run returned without resigning")
	}
	if n := tr.most.Load(); n != 1 {
		t.Errorf("%d transport publishes in flight at once, want 1: passes piled up behind the stuck one", n)
	}
	if n := tr.calls.Load(); n != 1 {
		t.Errorf("%d transport publishes while the first was stuck, want 1", n)
	}
}

// Once the stuck publish returns, the next pass publishes to the transport again.
func TestTransportPublishResumesAfterAStuckOne(t *testing.T) {
	t.Parallel()
	drv := &wakeupCounter{Driver: testdb.Open(t, "sqlite")}
	ctx := context.Background()
	if _, err := drv.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	tr := &stuckTransport{entered: make(chan struct{}, 100), release: make(chan struct{})}
	e := maintenance.New(drv, maintenance.Config{
		ID: "e", LeaderTTL: 600 * time.Millisecond, ReconcileInterval: 20 * time.Millisecond,
		Publish: tr.Publish,
	})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.Run(rctx) }()
	var once sync.Once
	t.Cleanup(func() { cancel(); once.Do(func() { close(tr.release) }); <-done })
	select {
	case <-tr.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the reconciler never published to the transport")
	}
	once.Do(func() { close(tr.release) })
	select {
	case <-tr.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no transport publish after the stuck one returned")
	}
}
