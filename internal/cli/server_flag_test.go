package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --server given empty (--server "$URL" with URL unset) is refused, as an
// empty --database-url is: the jobs, dlq and worker commands must not fall
// back to the database, writing a job into a ./drover.db of the directory the
// command ran in while the user meant the server's.
func TestEmptyServerFlagIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // where the default ./drover.db would be made
	t.Setenv("DROVER_DATABASE_URL", "")
	t.Setenv("DROVER_SERVER", "")
	for _, args := range [][]string{
		{"jobs", "enqueue", "echo", "--server", ""},
		{"--server=", "jobs", "list"},
		{"dlq", "purge", "--server", ""},
		// --concurrency 0 stops a worker that went to the database at once.
		{"worker", "--server", "", "--concurrency", "0"},
	} {
		code, stdout, stderr := run(t, args...)
		if code != 2 || !strings.Contains(stderr, "invalid server: is empty") {
			t.Errorf("drover %q: exit %d, stdout %q, stderr %q; want exit 2 with %q", args, code, stdout, stderr, "invalid server: is empty")
		}
	}
	if _, err := os.Stat(filepath.Join(dir, DefaultDatabaseURL)); !os.IsNotExist(err) {
		t.Errorf("an empty --server made %s (stat: %v); want nothing written", DefaultDatabaseURL, err)
	}
}
