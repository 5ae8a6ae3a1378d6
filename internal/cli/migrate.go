package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
)

func newMigrateCmd(g *globals) *cobra.Command {
	cmd := group(&cobra.Command{Use: "migrate", Short: "Apply or inspect the database schema"})
	up := &cobra.Command{
		Use:   "up",
		Short: "Apply all pending migrations",
		Args:  exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			drv, err := drover.Open(cmd.Context(), g.databaseURL, g.logger())
			if err != nil {
				return err
			}
			defer drv.Close()
			if err := drv.MigrateUp(cmd.Context()); err != nil {
				return err
			}
			st, err := drv.MigrateStatus(cmd.Context())
			if err != nil {
				return err
			}
			if g.output == "json" {
				return g.json(st)
			}
			fmt.Fprintf(g.stdout, "%s: schema at version %d\n", describeURL(g.databaseURL), st.Current)
			return nil
		},
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the applied and available schema versions",
		Args:  exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Status only looks: it does not create the SQLite file that opening
			// a missing path would. A missing file is a database at version 0,
			// as an empty PostgreSQL database is: the versions it lacks are
			// read off an empty database in memory.
			url, noFile := g.databaseURL, ""
			if path, ok := sqlitePath(url); ok {
				_, err := os.Stat(path)
				_, derr := os.Stat(filepath.Dir(path)) // none: Open says so
				if errors.Is(err, fs.ErrNotExist) && derr == nil {
					url, noFile = ":memory:", path
				}
			}
			drv, err := drover.Open(cmd.Context(), url, g.logger())
			if err != nil {
				return err
			}
			defer drv.Close()
			st, err := drv.MigrateStatus(cmd.Context())
			if err != nil {
				return err
			}
			if g.output == "json" {
				return g.json(st)
			}
			latest := st.Latest()
			state := "up to date"
			switch {
			case st.Current > latest:
				state = "AHEAD: a newer drover migrated it; run that version"
			case st.Dirty:
				// Drover's own migrations run in one transaction each and never
				// leave this mark; an older drover's or a down migration can.
				// Current 0 is golang-migrate's -1, no version.
				err := &driver.SchemaDirtyError{Version: st.Current, Table: "drover_schema_migrations"} // both drivers'
				state = "DIRTY: " + strings.TrimPrefix(err.Error(), driver.ErrSchemaDirty.Error()+": ")
			case st.Current < latest:
				state = fmt.Sprintf("%d pending: run `drover migrate up`", countAbove(st.Available, st.Current))
			}
			if noFile != "" {
				state += " (there is no file yet: it, or any other command, creates it)"
			}
			fmt.Fprintf(g.stdout, "database:  %s\ncurrent:   %d\nlatest:    %d\nstate:     %s\n",
				describeURL(g.databaseURL), st.Current, latest, state)
			return nil
		},
	}
	cmd.AddCommand(up, status)
	return cmd
}

func countAbove(vs []uint, v uint) int {
	n := 0
	for _, x := range vs {
		if x > v {
			n++
		}
	}
	return n
}

// sqlitePath returns the file a SQLite database URL names (a plain path or
// sqlite://path, without query parameters), as drover.Open reads it; not a
// PostgreSQL keyword/value string, which drover.Open refuses.
func sqlitePath(url string) (string, bool) {
	url = strings.TrimSpace(url)
	if url == "" || strings.Contains(url, "://") && !strings.HasPrefix(url, "sqlite://") || driver.IsKeywordConnString(url) {
		return "", false
	}
	path, _, _ := strings.Cut(strings.TrimPrefix(url, "sqlite://"), "?")
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return "", false
	}
	return path, true
}

// notThroughServer refuses --server and --token on a command that works on
// the database itself: it would otherwise act on the local ./drover.db while
// the user meant the server's database, or serve without the token given.
func notThroughServer(cmd *cobra.Command) error {
	if cmd.Flags().Changed("server") {
		return driver.Invalid("server", "%s works on a database (--database-url), not through a server", cmd.CommandPath())
	}
	if cmd.Flags().Changed("cacert") {
		return driver.Invalid("cacert", "is for an https --server; %s takes none (a server's own TLS files are --tls-cert and --tls-key)", cmd.CommandPath())
	}
	if cmd.Flags().Changed("token") {
		// `drover server --token T` served without auth: the server's own
		// tokens are --admin-token and --worker-token.
		return driver.Invalid("token", "is a client's token for --server; %s takes none (a server's tokens are --admin-token and --worker-token)", cmd.CommandPath())
	}
	return nil
}
