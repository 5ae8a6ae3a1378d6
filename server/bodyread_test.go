package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A body that stops arriving is a 400 that says why, without the connection's
// addresses (a *net.OpError's text names both ends).
func TestStalledBodyIsRefusedWithoutAddresses(t *testing.T) {
	ts := httptest.NewUnstartedServer(newTestServer(t, Config{}))
	ts.Config.ReadTimeout = 300 * time.Millisecond
	ts.Start()
	defer ts.Close()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"kind\":"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("status %d, body not JSON: %v", resp.StatusCode, err)
	}
	msg := body.Error.Message
	if resp.StatusCode != http.StatusBadRequest || body.Error.Code != CodeInvalidArgument {
		t.Errorf("status %d code %q (%s), want 400 %s", resp.StatusCode, body.Error.Code, msg, CodeInvalidArgument)
	}
	if !strings.Contains(msg, "read timeout") || strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "tcp") {
		t.Errorf("message %q: want the read timeout named, and no address", msg)
	}
}

// A body over the limit is answered 413 once its client has sent it all: the
// connection closes after such a body, and a client still sending met the
// close (a broken pipe or a reset) instead of the answer.
func TestBodyOverTheLimitIsAnsweredAfterItIsRead(t *testing.T) {
	ts := httptest.NewServer(newTestServer(t, Config{MaxBodyBytes: 64 << 10}))
	defer ts.Close()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"kind":"k","args":{"blob":"` + strings.Repeat("x", 16<<20) + `"}}`
	head := fmt.Sprintf("POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	if _, err := io.WriteString(conn, head+body); err != nil {
		t.Fatalf("sending a 16 MiB body to a 64 KiB limit: %v (the server closed before reading it)", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a body over the limit: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", resp.StatusCode)
	}
}
