package wakeup

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A subscriber that starts while the NATS server is down (a worker started
// during an outage of NATS, after its transport connected) gets a subscription
// at once, and pointers through it once the server is back. Before, Subscribe
// waited the client's request timeout (5s) a queue and failed, and the worker,
// which then polls only, never had the transport's wake-ups again.
func TestNATSSubscribeDuringAnOutage(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	srv := startNATSServer(t, port)
	n := openNATS(t, url, isolate(t, url, NATSOptions{
		Logger:         testLogger(t),
		ConnectOptions: []nats.Option{nats.ReconnectWait(50 * time.Millisecond)},
	}))
	// The outage as the client knows it: a Subscribe racing the client's
	// notice of the dead socket sends its request into the connection and
	// waits out the request timeout (seen in CI: 5.001s), as any request would.
	down := n.nc.StatusChanged(nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED)
	defer n.nc.RemoveStatusListener(down)
	_ = srv.Process.Kill()
	_ = srv.Wait()
	select {
	case <-down:
	case <-time.After(30 * time.Second):
		t.Fatal("the client did not notice the NATS server's death within 30s")
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	began := time.Now()
	ch, err := n.Subscribe(ctx, []string{"q"})
	took := time.Since(began)
	if err != nil {
		t.Fatalf("Subscribe during an outage: %v (after %s), want a subscription that starts once the server is back", err, took.Round(time.Millisecond))
	}
	if took > time.Second {
		t.Errorf("Subscribe during an outage took %s, want it at once (a worker's Start waits for it)", took.Round(time.Millisecond))
	}
	startNATSServer(t, port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		pctx, pcancel := context.WithTimeout(t.Context(), 2*time.Second)
		err := n.Publish(pctx, []Pointer{{"q", 7}})
		pcancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish after the outage still failing: %v", err)
		}
		retry := time.NewTimer(100 * time.Millisecond)
		<-retry.C
	}
	if m := recv(t, ch, 30*time.Second); m.JobID != 7 {
		t.Fatalf("got job %d, want 7", m.JobID)
	}
}

// A consumer the server refuses still fails Subscribe, at once: it is a
// misconfiguration no retry mends (here another consumer already takes the
// queue's subject of the work-queue stream). Regression test: passes on the
// code before the outage change too.
func TestNATSSubscribeFailsForARefusedConsumer(t *testing.T) {
	t.Parallel()
	n := newTestNATS(t, NATSOptions{Logger: testLogger(t)})
	if _, err := n.js.CreateOrUpdateConsumer(t.Context(), n.opts.Stream, jetstream.ConsumerConfig{
		Durable: "squatter", FilterSubject: n.subject("q"), AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	ch, err := n.Subscribe(t.Context(), []string{"q"})
	if err == nil {
		t.Fatalf("Subscribe with the queue's subject taken by another consumer: nil error (channel %v), want the server's refusal", ch != nil)
	}
}
