package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --lease below 100ms, the shortest lease a worker takes, is refused by every
// command that runs a node. `drover server --lease 1us` started, and every
// task-claim then answered 503 "the database did not answer in time": the
// server bounds each claim's database work by its lease.
func TestLeaseFlagBelowTheShortestIsRefused(t *testing.T) {
	db := filepath.Join(t.TempDir(), "d.db")
	for _, cmd := range []string{"server", "dev", "worker"} {
		for lease, shown := range map[string]string{"1us": "1µs", "99ms": "99ms"} {
			args := []string{"--database-url", db, cmd, "--lease", lease, "--addr", "127.0.0.1:0"}
			if cmd == "worker" {
				args = args[:len(args)-2]
			}
			type result struct {
				code   int
				stderr string
			}
			done := make(chan result, 1)
			go func() {
				var out, errb bytes.Buffer
				code := Main(args, &out, &errb)
				done <- result{code, errb.String()}
			}()
			select {
			case r := <-done:
				if want := "invalid lease: " + shown + " is below 100ms"; r.code != 2 || !strings.Contains(r.stderr, want) {
					t.Errorf("drover %s: exit %d, stderr %q; want exit 2 with %q", strings.Join(args, " "), r.code, r.stderr, want)
				}
			case <-time.After(20 * time.Second):
				// Left running: it ends with the test binary.
				t.Fatalf("drover %s still runs after 20s; want it refused at once (exit 2)", strings.Join(args, " "))
			}
		}
	}
}
