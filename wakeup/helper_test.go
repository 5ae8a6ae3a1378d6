package wakeup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/testdb"
)

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
	url := testdb.NATSURL(t)
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
