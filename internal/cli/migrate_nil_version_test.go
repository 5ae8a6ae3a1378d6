package cli

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
)

func TestExploreNilDirty(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			url := testdb.URL(t, kind)
			if code, _, stderr := run(t, "--database-url", url, "migrate", "up"); code != 0 {
				t.Fatalf("migrate up: exit %d: %s", code, stderr)
			}
			execVersionTable(t, url, "UPDATE drover_schema_migrations SET version = -1, dirty = true")
			for _, args := range [][]string{{"migrate", "status"}, {"migrate", "status", "--output", "json"}, {"migrate", "up"}, {"jobs", "list"}} {
				code, stdout, stderr := run(t, append([]string{"--database-url", url}, args...)...)
				t.Logf("%v: exit %d\nstdout %s\nstderr %s", args, code, stdout, stderr)
				_ = strings.Contains
			}
		})
	}
}
