package wakeup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultTestNATSURL is used when DROVER_TEST_NATS_URL is unset.
const DefaultTestNATSURL = "nats://127.0.0.1:4222"

// testNATSURL returns the NATS server tests use. If it is unreachable the test is
// skipped, except under CI=true, where it fails: CI must never pass by skipping
// (the policy of internal/testdb for PostgreSQL).
func testNATSURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("DROVER_TEST_NATS_URL")
	if url == "" {
		url = DefaultTestNATSURL
	}
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err == nil {
		defer nc.Close()
		js, jerr := jetstream.New(nc)
		if jerr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = js.AccountInfo(ctx)
		} else {
			err = jerr
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NATS JetStream unreachable at %s (CI=true, so this fails instead of skipping): %v", url, err)
		}
		t.Skipf("NATS JetStream unreachable at %s: %v", url, err)
	}
	return url
}

// isolate gives opts a stream and subject prefix private to t and deletes the
// stream (and with it its consumers) at cleanup.
func isolate(t testing.TB, url string, opts NATSOptions) NATSOptions {
	t.Helper()
	id := randomHex(6)
	opts.Stream = "DROVER_TEST_" + id
	opts.SubjectPrefix = "drovertest." + id
	t.Cleanup(func() {
		nc, err := nats.Connect(url)
		if err != nil {
			return
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, opts.Stream)
	})
	return opts
}

// newTestNATS opens a NATS transport on a private stream, closed at cleanup.
func newTestNATS(t testing.TB, opts NATSOptions) *NATS {
	t.Helper()
	url := testNATSURL(t)
	opts = isolate(t, url, opts)
	return openNATS(t, url, opts)
}

// openNATS opens another transport on the same stream, as a second process would.
func openNATS(t testing.TB, url string, opts NATSOptions) *NATS {
	t.Helper()
	n, err := NewNATS(t.Context(), url, opts)
	if err != nil {
		t.Fatalf("NewNATS: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// recv waits for one message, failing the test after d.
func recv(t testing.TB, ch <-chan Message, d time.Duration) Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatalf("subscription closed while waiting for a pointer")
		}
		return m
	case <-time.After(d):
		t.Fatalf("no pointer within %s", d)
	}
	return Message{}
}

// waitClosed drains ch until it closes, failing the test if it stays open.
func waitClosed(t testing.TB, ch <-chan Message) {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("subscription still open %s after it should have ended", wait)
		}
	}
}

// streamMsgs is how many pointers the stream holds now.
func streamMsgs(t testing.TB, n *NATS) uint64 {
	t.Helper()
	s, err := n.js.Stream(t.Context(), n.opts.Stream)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return info.State.Msgs
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
