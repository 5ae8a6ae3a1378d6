package cli

import (
	"strings"
	"testing"
)

// drover worker --server works through the server's worker protocol, whose
// long poll the server wakes: a --nats-url given with it was ignored without
// a word (no connection tried, no wake-up taken), so it is refused, naming the
// flag. From the environment (DROVER_NATS_URL set for a fleet) it stays a
// default that a remote worker does not use.
// Not parallel: it changes the environment.
func TestRemoteWorkerRefusesNATSURL(t *testing.T) {
	t.Setenv("DROVER_NATS_URL", "")
	t.Setenv("DROVER_SERVER", "")
	// --concurrency 0 stops a worker that took the flag at once (exit 2
	// naming concurrency), where the refusal names nats-url.
	code, stdout, stderr := run(t, "worker", "--server", "http://127.0.0.1:1", "--nats-url", "nats://127.0.0.1:4222", "--concurrency", "0")
	if code != 2 || !strings.Contains(stderr, "invalid nats-url: ") {
		t.Errorf("worker --server --nats-url: exit %d, stdout %q, stderr %q; want exit 2 with %q", code, stdout, stderr, "invalid nats-url")
	}
	t.Setenv("DROVER_NATS_URL", "nats://127.0.0.1:4222")
	code, _, stderr = run(t, "worker", "--server", "http://127.0.0.1:1", "--concurrency", "0")
	if code != 2 || !strings.Contains(stderr, "invalid concurrency") {
		t.Errorf("worker --server under DROVER_NATS_URL: exit %d, stderr %q; want it to go on (to the concurrency check)", code, stderr)
	}
}
