package cli

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
)

// The version row golang-migrate's Down leaves when the down migration of its
// first version stops half-way, (-1, dirty), is reported as that, on both
// drivers: no version, with the statement that clears it. PostgreSQL's
// `migrate up` printed it as migration 18446744073709551615 (-1 as a uint),
// and `migrate status` on both drivers as "migration 0 stopped half-way ...
// make the schema what 0 leaves", a version that never existed.
func TestMigrateReportsADirtyNilVersion(t *testing.T) {
	t.Parallel()
	const table = "drover_schema_migrations" // both drivers'
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			url := testdb.URL(t, kind)
			if code, _, stderr := run(t, "--database-url", url, "migrate", "up"); code != 0 {
				t.Fatalf("migrate up: exit %d: %s", code, stderr)
			}
			execVersionTable(t, url, "UPDATE "+table+" SET version = -1, dirty = true")
			cmds := [][]string{{"migrate", "status"}, {"migrate", "up"}}
			if kind == "sqlite" {
				cmds = append(cmds, []string{"jobs", "list"})
			}
			for _, args := range cmds {
				code, stdout, stderr := run(t, append([]string{"--database-url", url}, args...)...)
				out := stdout + stderr
				if wantCode := args[1] != "status"; (code != 0) != wantCode ||
					strings.Contains(out, "18446744073709551615") || strings.Contains(out, "migration 0 ") ||
					!strings.Contains(out, "no version (-1") || !strings.Contains(out, "DELETE FROM "+table) {
					t.Errorf("%v on a dirty -1 version: exit %d, output %q; want the dirty mark of no version (-1) and the statement that clears it", args, code, out)
				}
			}
		})
	}
}
