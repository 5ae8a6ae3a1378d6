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
	ctx := context.Background()
	drv, err := drover.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	switch d := drv.(type) {
	case *pgdriver.Driver:
		_, err = d.Pool().Exec(ctx, "UPDATE drover_schema_migrations SET version = version + 1")
	case *sqlitedriver.Driver:
		_, err = d.DB().ExecContext(ctx, "UPDATE schema_migrations SET version = version + 1")
	default:
		t.Fatalf("unknown driver %T", drv)
	}
	if err != nil {
		t.Fatal(err)
	}
}
