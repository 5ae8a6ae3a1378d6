package wakeup

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/drover-dev/drover/internal/testproc"
)

func TestNATSSubscriberRecreatesDeletedConsumer(t *testing.T) {
	t.Parallel()
	n := newTestNATS(t, NATSOptions{Logger: testLogger(t)})
	ch, err := n.Subscribe(t.Context(), []string{"q"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.js.DeleteConsumer(t.Context(), n.opts.Stream, consumerName("q")); err != nil {
		t.Fatal(err)
	}
	if err := n.Publish(t.Context(), []Pointer{{"q", 5}}); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, ch, wait); m.JobID != 5 {
		t.Fatalf("got job %d, want 5", m.JobID)
	}
}

// TestNATSSurvivesServerRestart kills a private nats-server with SIGKILL and starts
// a new one on the same port. The stream is in memory, so the restart loses it and
// its consumer too: the publisher and the subscriber must both recreate them, and
// the subscription must never close.
func TestNATSSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	srv := startNATSServer(t, port)
	n := openNATS(t, url, isolate(t, url, NATSOptions{
		MemoryStorage:  true,
		Logger:         testLogger(t),
		ConnectOptions: []nats.Option{nats.ReconnectWait(50 * time.Millisecond)},
	}))
	ch, err := n.Subscribe(t.Context(), []string{"q"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Publish(t.Context(), []Pointer{{"q", 1}}); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, ch, wait); m.JobID != 1 {
		t.Fatalf("before the restart got job %d, want 1", m.JobID)
	}

	_ = srv.Process.Kill()
	_ = srv.Wait()
	startNATSServer(t, port)

	// Publish fails while the client reconnects; a publisher retries or relies on
	// polling. Here it retries until the server stores the pointer.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		err := n.Publish(ctx, []Pointer{{"q", 2}})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish after the restart still failing: %v", err)
		}
		retry := time.NewTimer(100 * time.Millisecond)
		<-retry.C
	}
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("the subscription closed across the restart")
		}
		if m.JobID != 2 {
			t.Fatalf("after the restart got job %d, want 2", m.JobID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no pointer delivered within 30s of the restart")
	}
}

// startNATSServer runs a private nats-server with JetStream on port until cleanup
// and waits until it accepts connections.
func startNATSServer(t *testing.T, port int) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("nats-server not installed (CI=true, so this fails instead of skipping)")
		}
		t.Skip("nats-server not installed")
	}
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port))
		if err == nil {
			nc.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server on port %d not ready: %v", port, err)
		}
		retry := time.NewTimer(20 * time.Millisecond)
		<-retry.C
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// A NATS server that stops answering (SIGSTOP: alive to TCP, silent) costs a
// Publish PublishWait, not the minutes until the client declares the connection
// dead: an Enqueue publishes after its commit, and the reconciler every pass.
func TestNATSPublishToAHungServerGivesUpAfterPublishWait(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	srv := startNATSServer(t, port)
	n := openNATS(t, url, isolate(t, url, NATSOptions{PublishWait: 300 * time.Millisecond, Logger: testLogger(t)}))
	if err := n.Publish(t.Context(), []Pointer{{"q", 1}}); err != nil {
		t.Fatal(err)
	}
	testproc.Stop(t, srv.Process)
	t.Cleanup(func() { _ = srv.Process.Signal(syscall.SIGCONT) })
	res := make(chan error, 1)
	go func() { res <- n.Publish(context.Background(), []Pointer{{"q", 2}}) }()
	select {
	case err := <-res:
		if err == nil {
			t.Error("Publish to a stopped server succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Publish to a stopped server has not returned after 10s (PublishWait 300ms)")
	}
}
