package pgdriver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// holdAnswerProxy is a TCP proxy in front of PostgreSQL that, once a client
// has sent a message holding trigger, holds what the server answers from the
// statement's execution on (its first DataRow or CommandComplete, through
// its ReadyForQuery) and signals held when that ReadyForQuery has come: the
// server has finished the statement, and the client waits for an answer that
// does not come, as over a network that stalls.
type holdAnswerProxy struct {
	ln      net.Listener
	target  string
	trigger []byte
	held    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	ports   []int32 // the local ports of its connections to the server
}

// sessionsBusy counts the proxy's sessions that are not idle, read on conn.
func (p *holdAnswerProxy) sessionsBusy(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	p.mu.Lock()
	ports := append([]int32(nil), p.ports...)
	p.mu.Unlock()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY($1) AND state <> 'idle'", ports).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func startHoldAnswerProxy(t *testing.T, target string, trigger string) *holdAnswerProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdAnswerProxy{ln: ln, target: target, trigger: []byte(trigger), held: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *holdAnswerProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	p.mu.Lock()
	p.ports = append(p.ports, int32(server.LocalAddr().(*net.TCPAddr).Port))
	p.mu.Unlock()
	var mu sync.Mutex
	armed, holding := false, false
	go func() { // client → server, watching for trigger
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if bytes.Contains(buf[:n], p.trigger) {
					mu.Lock()
					armed = true
					mu.Unlock()
				}
				if _, werr := server.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				server.Close()
				return
			}
		}
	}()
	// server → client, message by message: type byte, int32 length.
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(server, hdr[:]); err != nil {
			return
		}
		body := make([]byte, int(binary.BigEndian.Uint32(hdr[1:]))-4)
		if _, err := io.ReadFull(server, body); err != nil {
			return
		}
		mu.Lock()
		// Held from the statement's first row or its completion on: its
		// Parse's and Describe's answers go through.
		if armed && (hdr[0] == 'D' || hdr[0] == 'C') {
			holding = true
		}
		hold := holding
		mu.Unlock()
		if hold {
			if hdr[0] == 'Z' { // ReadyForQuery: the statement is done
				p.once.Do(func() { close(p.held) })
			}
			continue // never sent
		}
		if _, err := client.Write(append(hdr[:], body...)); err != nil {
			return
		}
	}
}

// A batch without idempotency keys whose ctx ends while its insert's answer
// is on its way (the database has run the statement) answers an error and
// leaves nothing: sent on the pool, the statement committed on its own as it
// ended, and the caller, its answer cut off, had an error for jobs that were
// there; a retry, as an error invites, enqueued them twice, with no key to
// tell (helper-91). In the driver's own transaction, whose COMMIT is sent
// only while ctx is live, the dropped connection rolls it back.
func TestCanceledBatchWithoutKeysCommitsNothing(t *testing.T) {
	base := testdb.PostgresURL(t)
	openURL(t, base) // migrates
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startHoldAnswerProxy(t, u.Host, "INSERT INTO drover_jobs")
	u.Host = proxy.ln.Addr().String()
	_, d := driverOnPool(t, u.String(), func(cfg *pgxpool.Config) {})

	params := make([]driver.InsertParams, 20)
	for i := range params {
		params[i] = driver.InsertParams{Kind: "email", Queue: "q", Args: json.RawMessage(`{}`), MaxAttempts: 1}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := d.JobInsertMany(ctx, params)
		done <- err
	}()
	select {
	case <-proxy.held:
	case <-time.After(20 * time.Second):
		t.Fatal("the insert's answer never came to the proxy")
	}
	cancel()
	var answer error
	select {
	case answer = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("JobInsertMany did not return within 20s of its ctx's end")
	}
	if answer == nil {
		t.Fatal("JobInsertMany succeeded without its answer")
	}
	// Until none of the proxy's sessions runs anything any more.
	check, err := pgx.Connect(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close(context.Background())
	deadline := time.Now().Add(20 * time.Second)
	for {
		if proxy.sessionsBusy(t, check) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the insert's session still runs after 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var n int
	if err := check.QueryRow(context.Background(), "SELECT count(*) FROM drover_jobs").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("JobInsertMany answered %q, yet %d of its %d jobs were committed: a retry enqueues them twice", answer, n, len(params))
	}
}
