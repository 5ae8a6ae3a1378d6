package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// replica is one `drover server` of several over one PostgreSQL database, as
// behind a load balancer: a pool of its own, a Client, a Server, and an HTTP
// listener on loopback that ListenAndServe serves.
type replica struct {
	drv  driver.Driver
	c    *drover.Client
	s    *Server
	base string // http://127.0.0.1:port
	stop func() // shuts the listener down gracefully and closes the Server
}

// startReplica serves the database at url (testdb.URL) through a new pool,
// wrapped by wrap if set.
func startReplica(t *testing.T, url string, wrap func(driver.Driver) driver.Driver, cfg Config) *replica {
	t.Helper()
	var drv driver.Driver = testdb.OpenURL(t, "postgres", url)
	if wrap != nil {
		drv = wrap(drv)
	}
	c, err := drover.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(c, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	addr, served := make(chan net.Addr, 1), make(chan error, 1)
	go func() {
		served <- ListenAndServe(ctx, s, ListenConfig{Addr: "127.0.0.1:0", Ready: func(a net.Addr) { addr <- a }}, nil)
	}()
	var a net.Addr
	select {
	case a = <-addr:
	case err := <-served:
		t.Fatalf("ListenAndServe: %v", err)
	}
	stopped := false
	r := &replica{drv: drv, c: c, s: s, base: "http://" + a.String()}
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ListenAndServe: %v", err)
		}
		s.Close()
	}
	t.Cleanup(r.stop)
	return r
}

// post sends body to the replica's path and returns the status and the body
// answered.
func (r *replica) post(ctx context.Context, t *testing.T, path, body string) (int, []byte) {
	t.Helper()
	code, b, err := r.send(ctx, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return code, b
}

// send is post for another goroutine than the test's: it reports failure as
// an error.
func (r *replica) send(ctx context.Context, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("POST %s%s: %w", r.base, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("POST %s%s: read the answer: %w", r.base, path, err)
	}
	return resp.StatusCode, b, nil
}

// sendClaim is claim for another goroutine than the test's.
func (r *replica) sendClaim(ctx context.Context, body string) (claimAnswer, error) {
	var ans claimAnswer
	code, b, err := r.send(ctx, "/internal/task-claim", body)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("task-claim at %s: %d %s", r.base, code, b)
	}
	if err == nil {
		err = json.Unmarshal(b, &ans)
	}
	return ans, err
}

// claim posts a task-claim and decodes its answer, failing t unless it is a 200.
func (r *replica) claim(ctx context.Context, t *testing.T, body string) claimAnswer {
	t.Helper()
	code, b := r.post(ctx, t, "/internal/task-claim", body)
	var ans claimAnswer
	if code != http.StatusOK || json.Unmarshal(b, &ans) != nil {
		t.Fatalf("task-claim at %s: %d %s", r.base, code, b)
	}
	return ans
}

func fenceOf(tk Task) string {
	return fmt.Sprintf(`"task_id":%d,"attempt":%d,"lease_token":%q`, tk.TaskID, tk.Attempt, tk.LeaseToken)
}
