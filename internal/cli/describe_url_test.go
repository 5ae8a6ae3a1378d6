package cli

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
)

// What the commands print of the database (migrate's "database:" line, the
// startup lines of dev and server, "unreachable") names no password, whether
// the URL has it in its user info or as pgx's password= parameter.
func TestDatabaseLineHidesThePasswordParameter(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t, "postgres") // trust auth: a password is sent and ignored
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	withPassword := url + sep + "password=s3cret"
	for _, args := range [][]string{{"migrate", "up"}, {"migrate", "status"}} {
		code, stdout, stderr := run(t, append([]string{"--database-url", withPassword}, args...)...)
		if code != 0 {
			t.Fatalf("drover %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		if strings.Contains(stdout+stderr, "s3cret") {
			t.Errorf("drover %s printed the password:\n%s%s", strings.Join(args, " "), stdout, stderr)
		}
	}
	for in, want := range map[string]string{
		"postgres://u:s3cret@h:5432/db?sslmode=disable":     "postgres://…@h:5432/db?sslmode=disable",
		"postgres://u@h/db?password=s3cret&sslmode=require": "postgres://…@h/db?password=xxxxx&sslmode=require",
		"postgresql://h/db?user=u&password=s3cret":          "postgresql://h/db?user=u&password=xxxxx",
		"postgres://u:p@ss@h/db":                            "postgres://…@h/db",
		"./drover.db":                                       "sqlite:./drover.db",
	} {
		if got := describeURL(in); got != want {
			t.Errorf("describeURL(%q) = %q, want %q", in, got, want)
		}
	}
}
