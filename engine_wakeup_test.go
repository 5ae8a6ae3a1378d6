package drover_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/wakeup"
)

// blockingTransport is a wakeup.Transport whose Publish ignores its context
// and blocks until the test releases it, as a user's transport, or a client
// stuck on a dead connection, may. Subscriptions are the driver's.
type blockingTransport struct {
	wakeup.Transport
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingTransport) Publish(ctx context.Context, ps []wakeup.Pointer) error {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return nil
}

func (b *blockingTransport) unblock() { b.once.Do(func() { close(b.release) }) }

// A leader whose wake-up transport is stuck in a Publish that ignores its
// context still stops, and resigns, when its Run's context ends, so another
// engine takes over at once. Before, Run waited for the reconcile loop, which
// sat in the publish: it did not return, the lease was neither renewed nor
// resigned, and the successor waited out the whole lease.
func TestEngineResignsWhileATransportPublishIsStuck(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		enqueue(t, c, "k", map[string]int{}, nil) // something for the reconciler to publish
		tr := &blockingTransport{Transport: wakeup.FromDriver(c.Driver()), entered: make(chan struct{}, 1), release: make(chan struct{})}
		t.Cleanup(tr.unblock)
		const ttl = 20 * time.Second
		leads := make(chan bool, 10)
		a := drover.NewEngine(c, &drover.EngineConfig{ID: "a", LeaderTTL: ttl, ReconcileInterval: 20 * time.Millisecond, Wakeups: tr,
			OnLeader: func(l bool) { leads <- l }})
		actx, stopA := context.WithCancel(context.Background())
		aDone := make(chan struct{})
		go func() { defer close(aDone); _ = a.Run(actx) }()
		t.Cleanup(func() { stopA(); tr.unblock(); <-aDone })
		if !waitChan(t, leads, "engine a to lead") {
			t.Fatal("OnLeader(false) before OnLeader(true)")
		}
		waitChan(t, tr.entered, "a transport publish")

		bLeads := make(chan bool, 10)
		b := drover.NewEngine(c, &drover.EngineConfig{ID: "b", LeaderTTL: ttl, OnLeader: func(l bool) { bLeads <- l }})
		bctx, stopB := context.WithCancel(context.Background())
		bDone := make(chan error, 1)
		go func() { bDone <- b.Run(bctx) }()
		t.Cleanup(func() { stopB(); <-bDone })

		stopA()
		select {
		case <-aDone:
		case <-time.After(5 * time.Second):
			t.Error("engine a's Run did not return within 5s of its context ending while its transport publish was stuck")
		}
		select {
		case l := <-bLeads:
			if !l {
				t.Fatal("engine b: OnLeader(false) before OnLeader(true)")
			}
		case <-time.After(ttl / 2):
			t.Fatalf("engine b did not lead within %s of engine a stopping (lease %s): a did not resign", ttl/2, ttl)
		}
	})
}
