package blackbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/testdb"
)

// droverBin is the binary under test, built once by TestMain.
var droverBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "blackbox:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "drover-blackbox-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "blackbox:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	droverBin = filepath.Join(dir, "drover")
	build := exec.Command("go", "build", "-o", droverBin, "./cmd/drover")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "blackbox: go build ./cmd/drover: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// moduleRoot walks up from the working directory to the directory with go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// server is a running `drover server` process.
type server struct {
	base string // http://127.0.0.1:PORT
	kind string // postgres or sqlite
	url  string // its database
	out  *lockedBuffer
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lease is the servers' lease: long enough that no lease expires by accident
// while a test runs, even under -race on a busy machine.
const lease = "10s"

// startServer runs `drover server` on a fresh database of kind (migrated first for
// PostgreSQL, which the server does not migrate by itself), on a free loopback
// port, and returns once it prints where the API is. The process is killed with
// SIGKILL and waited for at cleanup.
func startServer(t *testing.T, kind string, args ...string) *server {
	t.Helper()
	return startOn(t, kind, migratedURL(t, kind), args...)
}

// migratedURL is a fresh database of kind, migrated with `drover migrate up`
// for PostgreSQL, which `drover server` does not migrate by itself.
func migratedURL(t *testing.T, kind string) string {
	t.Helper()
	url := testdb.URL(t, kind)
	if kind == "postgres" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, droverBin, "migrate", "up", "--database-url", url).CombinedOutput()
		if err != nil {
			t.Fatalf("drover migrate up: %v\n%s", err, out)
		}
	}
	return url
}

func startOn(t *testing.T, kind, url string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(droverBin, append([]string{"server", "--addr", "127.0.0.1:0", "--database-url", url,
		"--lease", lease, "--log-level", "warn"}, args...)...)
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("start drover server: %v", err)
	}
	s := &server{kind: kind, url: url, out: &lockedBuffer{}}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		<-done
		if t.Failed() {
			t.Logf("drover server (%s) stderr:\n%s", kind, s.out.String())
		}
	})
	api := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.out.WriteString(line + "\n")
			if f := strings.Fields(line); len(f) == 2 && f[0] == "API:" {
				select {
				case api <- f[1]:
				default:
				}
			}
		}
	}()
	select {
	case s.base = <-api:
	case <-done:
		t.Fatalf("drover server exited before printing its address:\n%s", s.out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("drover server did not print its address within 30s:\n%s", s.out.String())
	}
	if !strings.HasPrefix(s.base, "http://127.0.0.1:") {
		t.Fatalf("drover server printed API %q, want http://127.0.0.1:PORT", s.base)
	}
	return s
}

// cleanEnv is the environment without DROVER_* settings that would change the
// server under test (tokens, address, database).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DROVER_") {
			env = append(env, kv)
		}
	}
	return env
}

// client speaks to a server with one token ("" for none).
type client struct {
	t     *testing.T
	base  string
	token string
}

var httpClient = &http.Client{Timeout: 60 * time.Second}

func (s *server) client(t *testing.T, token string) *client {
	return &client{t: t, base: s.base, token: token}
}

// response is one answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends body (nil; a string or []byte sent as is; anything else as JSON).
func (c *client) do(method, path string, body any) response {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return c.send(req)
}

// send sends req as it is and reads the whole answer.
func (c *client) send(req *http.Request) response {
	c.t.Helper()
	resp, err := httpClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

// want fails unless the answer has status, and decodes its body into v (if set).
func (c *client) want(status int, method, path string, body, v any) response {
	c.t.Helper()
	r := c.do(method, path, body)
	if r.status != status {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, status, r.body)
	}
	if r.status >= 400 {
		checkError(c.t, r)
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, r.body, err)
		}
	}
	return r
}

// wantError fails unless the answer is the error shape with status and code, and
// returns its message.
func (c *client) wantError(status int, code, method, path string, body any) string {
	c.t.Helper()
	r := c.do(method, path, body)
	if r.status != status {
		c.t.Fatalf("%s %s: status %d, want %d (%s): %s", method, path, r.status, status, code, r.body)
	}
	e := checkError(c.t, r)
	if e.Error.Code != code {
		c.t.Fatalf("%s %s: code %q, want %q: %s", method, path, e.Error.Code, code, r.body)
	}
	return e.Error.Message
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// checkError fails unless r is exactly {"error": {"code", "message"}}.
func checkError(t *testing.T, r response) errorBody {
	t.Helper()
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("status %d: Content-Type %q, want application/json", r.status, ct)
	}
	var e errorBody
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("status %d: body is not {\"error\": {\"code\", \"message\"}}: %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), "goroutine ") || strings.Contains(string(r.body), ".go:") {
		t.Errorf("status %d: error shows a stack trace: %s", r.status, r.body)
	}
	return e
}
