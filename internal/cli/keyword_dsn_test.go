package cli

import (
	"os"
	"strings"
	"testing"
)

// A PostgreSQL keyword/value connection string is refused, naming no
// password: it was taken for a SQLite file path, so migrate up, server or dev
// made a SQLite file of that name (the password in it) in the directory they
// ran in, served the jobs meant for PostgreSQL from it, and printed the
// string as the database. Not parallel: it changes directory.
func TestKeywordConnectionStringIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, dsn := range []string{
		"host=127.0.0.1 user=postgres password=s3cret dbname=h",
		"dbname=h password = s3cret",
	} {
		for _, args := range [][]string{{"migrate", "up"}, {"migrate", "status"}, {"jobs", "list"}} {
			code, stdout, stderr := run(t, append([]string{"--database-url", dsn}, args...)...)
			if code != 2 || !strings.Contains(stderr, "postgres://") || strings.Contains(stdout+stderr, "s3cret") {
				t.Errorf("drover %s with %q: exit %d, stdout %q, stderr %q; want exit 2, a hint at postgres:// and no password",
					strings.Join(args, " "), dsn, code, stdout, stderr)
			}
		}
	}
	if files, _ := os.ReadDir(dir); len(files) > 0 {
		t.Errorf("files made in the working directory: %v", files)
	}
}
