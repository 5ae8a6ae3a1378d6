package cli

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/testdb"
)

// A version table of drover's name but another tool's shape is named, with
// what to do, by migrate up and status; one whose version is a timestamp is
// said to may be another tool's, not only "run a newer drover". The database's
// error alone named neither the table nor the fix (helper-92).
func TestForeignVersionTableIsNamed(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			for _, c := range []struct{ name, create, want string }{
				{"text version", `CREATE TABLE drover_schema_migrations (version text, dirty boolean); INSERT INTO drover_schema_migrations VALUES ('20240101_init', false)`,
					"read the schema version from"},
				{"timestamp version", `CREATE TABLE drover_schema_migrations (version bigint, dirty boolean); INSERT INTO drover_schema_migrations VALUES (20240101120000, false)`,
					"another tool's"},
			} {
				url := testdb.URL(t, kind)
				execSQL(t, kind, url, c.create)
				for _, args := range [][]string{{"migrate", "up"}, {"jobs", "list"}} {
					code, _, stderr := run(t, append([]string{"--database-url", url}, args...)...)
					if code != 1 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "drover_schema_migrations") && c.name == "text version" {
						t.Errorf("%s, %s: exit %d, stderr %q; want exit 1 naming the table and %q", c.name, args, code, stderr, c.want)
					}
				}
			}
		})
	}
}

// execSQL runs stmts (separated by "; ") on the database at url, as another
// tool would.
func execSQL(t *testing.T, kind, url, stmts string) {
	t.Helper()
	ctx := context.Background()
	for _, q := range strings.Split(stmts, "; ") {
		var err error
		if kind == "postgres" {
			var c *pgx.Conn
			if c, err = pgx.Connect(ctx, url); err == nil {
				_, err = c.Exec(ctx, q)
				_ = c.Close(ctx)
			}
		} else {
			var db *sql.DB
			if db, err = sql.Open("sqlite", url); err == nil {
				_, err = db.ExecContext(ctx, q)
				_ = db.Close()
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
