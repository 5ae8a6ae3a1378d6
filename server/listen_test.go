package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/server"
)

// selfSigned writes a certificate and key for 127.0.0.1 and returns their paths
// and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "drover-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

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
	certFile, keyFile, pool := selfSigned(t)
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
