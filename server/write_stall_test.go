package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// routeDone is a slog handler that closes done once wrap logs the end of a
// request of route.
type routeDone struct {
	route string
	once  *sync.Once
	done  chan struct{}
}

func (h routeDone) Enabled(context.Context, slog.Level) bool { return true }
func (h routeDone) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "request" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "route" && a.Value.String() == h.route {
			h.once.Do(func() { close(h.done) })
		}
		return true
	})
	return nil
}
func (h routeDone) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h routeDone) WithGroup(string) slog.Handler      { return h }

// A client that asks for a large answer (GET /jobs, 24 jobs of 900 KB of
// args) and then reads nothing held its request's goroutine, its
// connection and the answer's memory for ever: the server had no write
// timeout (a long poll must outlive any fixed one). Writing an answer that
// makes no progress for WriteStallTimeout now ends the request.
func TestStalledReaderIsCutOff(t *testing.T) {
	done := routeDone{route: "GET /jobs", once: &sync.Once{}, done: make(chan struct{})}
	s := newTestServer(t, Config{WriteStallTimeout: 500 * time.Millisecond, Logger: slog.New(done)})
	big := json.RawMessage(`{"pad":"` + strings.Repeat("x", 900<<10) + `"}`)
	for range 24 {
		if _, err := s.client.Enqueue(context.Background(), "k", big, nil); err != nil {
			t.Fatal(err)
		}
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET /jobs?limit=24 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing from here on.
	select {
	case <-done.done:
	case <-time.After(30 * time.Second):
		t.Fatal("GET /jobs to a client that reads nothing: its handler still writes 30s on, want it ended after WriteStallTimeout (500ms) without progress")
	}
}

// The write-stall bound does not cut a long poll: a task-claim waits out
// its wait_seconds, well past WriteStallTimeout, over HTTP/1.1 and HTTP/2,
// and answers.
func TestLongPollOutlivesTheWriteStallTimeout(t *testing.T) {
	s := newTestServer(t, Config{WriteStallTimeout: 100 * time.Millisecond})
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			ts := httptest.NewUnstartedServer(s)
			ts.EnableHTTP2 = proto == "HTTP/2.0"
			ts.StartTLS()
			defer ts.Close()
			hc := ts.Client()
			hc.Transport.(*http.Transport).TLSClientConfig.NextProtos = nil
			if proto == "HTTP/2.0" {
				hc.Transport.(*http.Transport).ForceAttemptHTTP2 = true
			} else {
				hc.Transport.(*http.Transport).TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
			}
			began := time.Now()
			resp, err := hc.Post(ts.URL+"/internal/task-claim", "application/json",
				strings.NewReader(`{"worker_id":"w","queues":["nothing-here"],"wait_seconds":1}`))
			if err != nil {
				t.Fatalf("task-claim, wait 1s: %v", err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			var answer claimAnswer
			if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(body, &answer) != nil || answer.Tasks == nil {
				t.Fatalf("task-claim, wait 1s: %d %s (%v), want 200 with no tasks", resp.StatusCode, body, err)
			}
			if resp.Proto != proto {
				t.Errorf("answered over %s, want %s", resp.Proto, proto)
			}
			if took := time.Since(began); took < 900*time.Millisecond {
				t.Errorf("task-claim, wait 1s, answered after %v: want it to wait its second", took)
			}
		})
	}
}
