package cli

import (
	"strings"
	"testing"
)

// --help shows no secret a variable holds: the flags read their defaults from
// the environment (DROVER_ADMIN_TOKEN and the like), and help printed each
// default, so a token or a database password went to a terminal's scrollback,
// a CI log or an issue's paste. Not parallel: it sets the environment.
func TestHelpShowsNoSecretFromTheEnvironment(t *testing.T) {
	t.Setenv("DROVER_ADMIN_TOKEN", "admin-s3cret")
	t.Setenv("DROVER_WORKER_TOKEN", "worker-s3cret")
	t.Setenv("DROVER_TOKEN", "client-s3cret")
	t.Setenv("DROVER_DATABASE_URL", "postgres://u:db-s3cret@127.0.0.1:1/db")
	t.Setenv("DROVER_NATS_URL", "nats://u:nats-s3cret@127.0.0.1:1")
	for _, args := range [][]string{
		{"--help"}, {"server", "--help"}, {"dev", "--help"}, {"worker", "--help"},
		{"jobs", "list", "--help"}, {"migrate", "status", "--help"}, {"dlq", "purge", "--help"},
	} {
		code, stdout, stderr := run(t, args...)
		if code != 0 {
			t.Errorf("drover %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		if strings.Contains(stdout+stderr, "s3cret") {
			t.Errorf("drover %s printed a secret from the environment:\n%s%s", strings.Join(args, " "), stdout, stderr)
		}
	}
	// The built-in default is still shown.
	if _, stdout, _ := run(t, "jobs", "list", "--help"); !strings.Contains(stdout, `(default "`+DefaultDatabaseURL+`")`) {
		t.Errorf("jobs list --help does not show --database-url's default %q:\n%s", DefaultDatabaseURL, stdout)
	}
}
