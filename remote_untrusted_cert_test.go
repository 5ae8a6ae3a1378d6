package drover_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/server"
)

// A remote worker whose client does not trust the https server's certificate
// fails at Start, saying so, and a token (bad or good) never leaves it. It
// took the refusal for a server that did not answer: it started, resent its
// claims for ever, logging x509's text, and a Stop waited for its collect
// until the shutdown timeout (helper-80). Trusting the server's CA, the same
// worker starts.
func TestRemoteWorkerRefusesAServerItDoesNotTrust(t *testing.T) {
	c := newClient(t, "sqlite", nil)
	srv := server.New(c, server.Config{LeaseDuration: serverLease})
	hs := httptest.NewTLSServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	ws := drover.NewWorkers()
	drover.Register(ws, "k", func(context.Context, *drover.Job, struct{}) (any, error) { return nil, nil })

	w, err := drover.NewRemoteWorker(drover.RemoteConfig{URL: hs.URL, WaitSeconds: 1}, fastWorkerConfig(ws))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = w.Start(ctx)
	if err == nil {
		stopped := time.Now()
		_ = w.Stop(ctx)
		t.Fatalf("Start against a server with an untrusted certificate succeeded (Stop took %s); want it refused", time.Since(stopped))
	}
	if !strings.Contains(err.Error(), "certificate the worker does not trust") {
		t.Errorf("Start: %v; want it to say the server's certificate is not trusted", err)
	}

	trusted, err := drover.NewRemoteWorker(drover.RemoteConfig{URL: hs.URL, WaitSeconds: 1, HTTPClient: hs.Client()}, fastWorkerConfig(ws))
	if err != nil {
		t.Fatal(err)
	}
	if err := trusted.Start(ctx); err != nil {
		t.Fatalf("Start trusting the server's certificate: %v", err)
	}
	if err := trusted.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
}
