package wakeup

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A NATS URL's credentials (user:password, or a token in the user's place)
// are named neither in NewNATS's error nor in the reconnect log line: the
// error reached drover dev's and drover server's stderr, the line every log.
func TestNATSNamesNoCredentials(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		fmt.Sprintf("nats://u:s3cret@127.0.0.1:%d", freePort(t)),
		fmt.Sprintf("nats://s3cret@127.0.0.1:%d", freePort(t)),
		fmt.Sprintf("nats://127.0.0.1:%d,nats://u:s3cret@127.0.0.1:%d", freePort(t), freePort(t)),
	} {
		_, err := NewNATS(t.Context(), url, NATSOptions{})
		if err == nil {
			t.Fatalf("NewNATS(%q) connected to nothing", url)
		}
		if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("NewNATS(%q): %v; want the address without the credentials", url, err)
		}
	}

	// A token in the user's place, which url.URL.Redacted leaves.
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		t.Skip("nats-server not installed")
	}
	port := freePort(t)
	srv := exec.Command(bin, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", t.TempDir(), "--auth", "s3cret")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	url := fmt.Sprintf("nats://s3cret@127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, err := nats.Connect(url)
		if err == nil {
			nc.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server not ready: %v", err)
		}
		retry := time.NewTimer(20 * time.Millisecond)
		<-retry.C
	}
	log := &signalLog{line: make(chan string, 16)}
	n := openNATS(t, url, NATSOptions{MemoryStorage: true, Logger: slog.New(log)})
	if err := n.nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case line := <-log.line:
			if !strings.Contains(line, "nats reconnected") {
				continue
			}
			if strings.Contains(line, "s3cret") || !strings.Contains(line, fmt.Sprint(port)) {
				t.Errorf("reconnect log line %q: want the address without the token", line)
			}
			return
		case <-time.After(30 * time.Second):
			t.Fatal("no reconnect logged within 30s")
		}
	}
}

// signalLog sends each record, as text, on line.
type signalLog struct{ line chan string }

func (h *signalLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *signalLog) WithGroup(string) slog.Handler            { return h }
func (h *signalLog) Handle(ctx context.Context, r slog.Record) error {
	var b bytes.Buffer
	_ = slog.NewTextHandler(&b, nil).Handle(ctx, r)
	select {
	case h.line <- b.String():
	default:
	}
	return nil
}
