package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/driver/sqlitedriver"
	"github.com/drover-dev/drover/internal/testdb"
)

// A schema that a newer drover migrated is refused, not misread: a command that
// opens the database fails saying the schema is newer, `migrate up` too, and
// `migrate status` says AHEAD.
func TestSchemaAheadIsRefused(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			db := testdb.URL(t, kind)
			if code, _, stderr := run(t, "--database-url", db, "migrate", "up"); code != 0 {
				t.Fatalf("migrate up: exit %d: %s", code, stderr)
			}
			bumpSchemaVersion(t, db)
			for _, args := range [][]string{{"jobs", "list"}, {"migrate", "up"}} {
				code, _, stderr := run(t, append([]string{"--database-url", db}, args...)...)
				if code == 0 || !strings.Contains(stderr, "newer than this build") || !strings.Contains(stderr, "run a newer drover") {
					t.Errorf("%v on a schema ahead: exit %d, stderr %q; want a failure saying the schema is newer", args, code, stderr)
				}
			}
			code, stdout, stderr := run(t, "--database-url", db, "migrate", "status")
			if code != 0 || !strings.Contains(stdout, "AHEAD") {
				t.Errorf("migrate status on a schema ahead: exit %d, stdout %q, stderr %q; want state AHEAD", code, stdout, stderr)
			}
		})
	}
}

// bumpSchemaVersion records one migration more than this build has, as a newer
// drover's `migrate up` would.
func bumpSchemaVersion(t *testing.T, url string) {
	t.Helper()
	execVersionTable(t, url, "UPDATE drover_schema_migrations SET version = version + 1")
}

// execVersionTable runs stmt on the database at url, whose version table both
// drivers name drover_schema_migrations.
func execVersionTable(t *testing.T, url, stmt string) {
	t.Helper()
	ctx := context.Background()
	drv, err := drover.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	switch d := drv.(type) {
	case *pgdriver.Driver:
		_, err = d.Pool().Exec(ctx, stmt)
	case *sqlitedriver.Driver:
		_, err = d.DB().ExecContext(ctx, stmt)
	default:
		t.Fatalf("unknown driver %T", drv)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A version left dirty (an older drover's migration killed between
// golang-migrate's transactions, or a down migration) stops every command that
// migrates: `migrate up` and `dev` on both drivers, every command on SQLite.
// Their error names the version and the statement that clears the mark in
// drover's own version table, as `migrate status` does, not golang-migrate's
// "Fix and force version": drover has no command to force one.
func TestMigrateUpSaysHowToClearADirtyVersion(t *testing.T) {
	t.Parallel()
	const table = "drover_schema_migrations" // both drivers'
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			db := testdb.URL(t, kind)
			if code, _, stderr := run(t, "--database-url", db, "migrate", "up"); code != 0 {
				t.Fatalf("migrate up: exit %d: %s", code, stderr)
			}
			markDirty(t, db)
			cmds := [][]string{{"migrate", "up"}}
			if kind == "sqlite" {
				cmds = append(cmds, []string{"jobs", "list"})
			}
			for _, args := range cmds {
				code, _, stderr := run(t, append([]string{"--database-url", db}, args...)...)
				if code == 0 || strings.Contains(stderr, "force version") || !strings.Contains(stderr, "marked dirty") ||
					!strings.Contains(stderr, "UPDATE "+table+" SET dirty = false") {
					t.Errorf("%v on a dirty version: exit %d, stderr %q; want a failure naming the dirty mark and the statement that clears it", args, code, stderr)
				}
			}
		})
	}
}

// markDirty marks the recorded version dirty, as a migration of an older
// drover killed half-way leaves it.
func markDirty(t *testing.T, url string) {
	t.Helper()
	execVersionTable(t, url, "UPDATE drover_schema_migrations SET dirty = true")
}
