package blackbox

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dev is a running `drover dev` process and what it printed before
// "Press Ctrl-C to stop.".
type dev struct {
	base   string // http://127.0.0.1:PORT
	banner string
}

// startDev runs `drover dev` on a fresh SQLite file and a free loopback port,
// and returns once it has printed its banner and hints. The process is killed
// with SIGKILL and waited for at cleanup.
func startDev(t *testing.T, args ...string) *dev {
	t.Helper()
	db := filepath.Join(t.TempDir(), "dev.db")
	cmd := exec.Command(droverBin, append([]string{"dev", "--addr", "127.0.0.1:0", "--database-url", db,
		"--log-level", "warn"}, args...)...)
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("start drover dev: %v", err)
	}
	out := &lockedBuffer{}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		<-done
		if t.Failed() {
			t.Logf("drover dev stderr:\n%s", out.String())
		}
	})
	ready := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if sc.Text() == "Press Ctrl-C to stop." {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-done:
		t.Fatalf("drover dev exited before printing its hints:\n%s", out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("drover dev printed no hints within 30s:\n%s", out.String())
	}
	d := &dev{banner: out.String()}
	for _, line := range strings.Split(d.banner, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "API:" {
			d.base = f[1]
		}
	}
	if !strings.HasPrefix(d.base, "http://127.0.0.1:") {
		t.Fatalf("drover dev printed API %q, want http://127.0.0.1:PORT:\n%s", d.base, d.banner)
	}
	return d
}

// hint returns the line of dev's banner that contains s.
func (d *dev) hint(t *testing.T, s string) string {
	t.Helper()
	for _, line := range strings.Split(d.banner, "\n") {
		if strings.Contains(line, s) {
			return strings.TrimSpace(line)
		}
	}
	t.Fatalf("drover dev printed no hint with %q:\n%s", s, d.banner)
	return ""
}

// curlBody is the JSON body of a printed curl hint: its -d '…'.
func curlBody(t *testing.T, hint string) string {
	t.Helper()
	_, rest, ok := strings.Cut(hint, "-d '")
	body, _, ok2 := strings.Cut(rest, "'")
	if !ok || !ok2 || !json.Valid([]byte(body)) {
		t.Fatalf("curl hint %q has no -d '<JSON>'", hint)
	}
	return body
}

// waitSucceeded polls the job until it succeeded, and fails the test if it
// has not within 30 s (the process is another: there is no signal to wait on).
func waitSucceeded(t *testing.T, c *client, id int64, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		j := c.get(id)
		if j.Status == "succeeded" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: job %d is still %s on queue %q after 30s", what, id, j.Status, j.Queue)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// drover dev --queues emails seeds its demo jobs on the queue its worker
// works, and its hints enqueue there: they went to "default", which that
// worker does not work, so "watch them below" showed nothing, ever, and the
// printed enqueue and curl made jobs that never ran.
func TestDevSeedsAndHintsTheQueueItWorks(t *testing.T) {
	t.Parallel()
	d := startDev(t, "--queues", "emails")
	c := &client{t: t, base: d.base}
	waitSucceeded(t, c, 1, "the echo job dev --queues emails seeded")
	if h := d.hint(t, "jobs enqueue echo"); !strings.Contains(h, "--queue emails") {
		t.Errorf("enqueue hint %q does not name --queue emails", h)
	}
	var j job
	c.want(201, "POST", "/jobs", curlBody(t, d.hint(t, "curl -s -X POST")), &j)
	waitSucceeded(t, c, j.ID, "the job of dev's curl hint")
}

// followCurl sends the request of a printed curl POST hint as written, its
// -H headers included, with "<admin token>" read as token.
func followCurl(t *testing.T, hint, token string) response {
	t.Helper()
	f := strings.Fields(hint)
	if len(f) < 5 || f[0] != "curl" || f[3] != "POST" {
		t.Fatalf("hint %q is not a curl POST", hint)
	}
	req, err := http.NewRequest("POST", f[4], strings.NewReader(curlBody(t, hint)))
	if err != nil {
		t.Fatal(err)
	}
	for rest := hint; ; {
		var h string
		var ok bool
		if _, rest, ok = strings.Cut(rest, "-H '"); !ok {
			break
		}
		h, rest, _ = strings.Cut(rest, "'")
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, strings.ReplaceAll(v, "<admin token>", token))
	}
	return (&client{t: t}).send(req)
}

// drover dev's curl hint works when the API asks for tokens: with
// --admin-token it carries an Authorization header for it (not the token
// itself), and with only --worker-token, which opens /internal/* alone, it is
// not printed as one that would work. It was printed bare, and answered 401.
func TestDevCurlHintWithTokens(t *testing.T) {
	t.Parallel()
	t.Run("admin token", func(t *testing.T) {
		t.Parallel()
		const token = "s3cret-admin"
		d := startDev(t, "--admin-token", token, "--seed=false")
		h := d.hint(t, "curl -s -X POST")
		if strings.Contains(d.banner, token) {
			t.Errorf("drover dev printed its admin token:\n%s", d.banner)
		}
		if r := followCurl(t, h, token); r.status != 201 {
			t.Errorf("curl hint %q, sent with the admin token: status %d, want 201: %s", h, r.status, r.body)
		}
	})
	t.Run("worker token only", func(t *testing.T) {
		t.Parallel()
		d := startDev(t, "--worker-token", "s3cret-worker", "--seed=false")
		for _, line := range strings.Split(d.banner, "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "curl -s -X POST") {
				if r := followCurl(t, line, ""); r.status != 201 {
					t.Errorf("curl hint %q: status %d, want 201 (or no such hint): %s", line, r.status, r.body)
				}
			}
		}
		if !strings.Contains(d.banner, "--admin-token") {
			t.Errorf("drover dev with only --worker-token does not say the API needs --admin-token:\n%s", d.banner)
		}
	})
}
