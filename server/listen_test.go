package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testcert"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/server"
)

// TestListenAndServeTLS serves HTTPS on loopback, answers a request, and shuts
// down gracefully when its context ends.
func TestListenAndServeTLS(t *testing.T) {
	t.Parallel()
	c, err := drover.NewClient(testdb.Open(t, "sqlite"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(c, server.Config{})
	t.Cleanup(srv.Close)
	certFile, keyFile, pool := testcert.SelfSigned(t)
	ctx, cancel := context.WithCancel(context.Background())
	bound := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.ListenAndServe(ctx, srv, server.ListenConfig{
			Addr: "127.0.0.1:0", TLSCertFile: certFile, TLSKeyFile: keyFile, Ready: func(a net.Addr) { bound <- a },
		}, nil)
	}()
	var addr net.Addr
	select {
	case addr = <-bound:
	case err := <-done:
		t.Fatalf("ListenAndServe returned before listening: %v", err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	resp, err := hc.Get("https://" + addr.String() + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Fatalf("GET /healthz over TLS: status %d, tls %v; want 200 over TLS", resp.StatusCode, resp.TLS != nil)
	}
	// Plain HTTP to the TLS port is refused.
	if resp, err := http.Get("http://" + addr.String() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP to the TLS listener answered 200")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ListenAndServe did not return after its context ended")
	}
	if _, err := hc.Get("https://" + addr.String() + "/healthz"); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("server still answers after shutdown (err %v)", err)
	}
}

func TestListenAndServeNeedsCertAndKey(t *testing.T) {
	t.Parallel()
	err := server.ListenAndServe(context.Background(), http.NotFoundHandler(), server.ListenConfig{Addr: "127.0.0.1:0", TLSCertFile: "x.pem"}, nil)
	if !errors.Is(err, drover.ErrInvalidArgument) {
		t.Fatalf("cert without key: err = %v, want ErrInvalidArgument", err)
	}
}
