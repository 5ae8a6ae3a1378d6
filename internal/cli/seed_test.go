package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// The demo jobs are enqueued once per database: a restart of drover dev
// enqueues none and says so, instead of claiming to have seeded them again.
func TestSeedDemoOncePerDatabase(t *testing.T) {
	c, err := drover.NewClient(testdb.Open(t, "sqlite"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{3, 0} {
		n, err := seedDemo(context.Background(), c, drover.DefaultQueue)
		if err != nil || n != want {
			t.Fatalf("start %d: seedDemo = %d, %v; want %d", i+1, n, err, want)
		}
	}
}

// migrate status only looks: on a SQLite path with no file it answers version
// 0 with every migration pending, as on an empty PostgreSQL database, says
// there is no file, and creates none.
func TestMigrateStatusCreatesNoSQLiteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	for _, url := range []string{path, "sqlite://" + path} {
		var out, errb bytes.Buffer
		code := Main([]string{"--database-url", url, "migrate", "status"}, &out, &errb)
		if code != 0 || !strings.Contains(out.String(), "current:   0\n") || !strings.Contains(out.String(), "pending: run `drover migrate up` (there is no file yet") {
			t.Errorf("migrate status of %s: exit %d, stdout %q, stderr %q; want 0, version 0, every migration pending, no file yet", url, code, out.String(), errb.String())
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("migrate status created %s (stat: %v)", path, err)
		}
	}
}

// A version left dirty (by an older drover's migration, or a down migration)
// is reported with the version and the statement that clears the mark, in the
// driver's own version table: drover has no command that would do it.
func TestMigrateStatusSaysHowToClearADirtyVersion(t *testing.T) {
	const table = "drover_schema_migrations" // both drivers'
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			url := testdb.URL(t, kind)
			if code, _, stderr := run(t, "--database-url", url, "migrate", "up"); code != 0 {
				t.Fatalf("migrate up: exit %d: %s", code, stderr)
			}
			markDirty(t, url)
			code, stdout, stderr := run(t, "--database-url", url, "migrate", "status")
			want := "stopped half-way (an older drover's, or a down migration); make the schema what "
			if code != 0 || !strings.Contains(stdout, "DIRTY: migration ") || !strings.Contains(stdout, want) ||
				!strings.Contains(stdout, "UPDATE "+table+" SET dirty = false") {
				t.Fatalf("migrate status of a dirty version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
		})
	}
}
