package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --token on the command line without a server to send it to is refused: a
// jobs, dlq or worker command would work on the database (a ./drover.db made
// in the directory it ran in) while the user meant a server and forgot
// --server, and `drover server --token T` (or dev) served the API with no
// auth at all, its own tokens being --admin-token and --worker-token.
// Not parallel: it changes directory and the environment.
func TestTokenWithoutServerIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("DROVER_DATABASE_URL", "")
	t.Setenv("DROVER_SERVER", "")
	t.Setenv("DROVER_TOKEN", "")
	for _, args := range [][]string{
		{"jobs", "enqueue", "echo", "--token", "secret"},
		{"--token", "secret", "dlq", "purge"},
		{"jobs", "list", "--token", "secret", "--database-url", "d.db"},
		// --concurrency 0 stops a worker that went to the database at once.
		{"worker", "--token", "secret", "--concurrency", "0"},
		// An out-of-range port stops a server that took the token at once.
		{"server", "--token", "secret", "--addr", "127.0.0.1:99999"},
		{"dev", "--token", "secret", "--addr", "127.0.0.1:99999"},
		{"migrate", "up", "--token", "secret"},
	} {
		code, stdout, stderr := run(t, args...)
		if code != 2 || !strings.Contains(stderr, "invalid token: is ") {
			t.Errorf("drover %q: exit %d, stdout %q, stderr %q; want exit 2 with %q", args, code, stdout, stderr, "invalid token")
		}
	}
	if _, err := os.Stat(filepath.Join(dir, DefaultDatabaseURL)); !os.IsNotExist(err) {
		t.Errorf("--token without a server made %s (stat: %v); want nothing written", DefaultDatabaseURL, err)
	}
	// From the environment it is only a default: a command on the database
	// runs.
	t.Setenv("DROVER_TOKEN", "secret")
	if code, _, stderr := run(t, "--database-url", "d.db", "jobs", "list"); code != 0 {
		t.Errorf("jobs list on a database under DROVER_TOKEN: exit %d: %s", code, stderr)
	}
	// With --server it is sent (here to nothing listening).
	if code, _, stderr := run(t, "--server", "http://127.0.0.1:1", "--token", "x", "jobs", "list"); code != 1 || !strings.Contains(stderr, "127.0.0.1:1") {
		t.Errorf("jobs list --server --token: exit %d, stderr %q; want it to try the server", code, stderr)
	}
}
