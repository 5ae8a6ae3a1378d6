package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/driver"
)

// A --nats-url that cannot name a server is bad input, exit 2 naming the
// flag, refused before anything is opened; the URL is not repeated (it may
// hold a password). It exited 1 as a failure to connect, with the NATS
// client's text.
func TestNATSURLThatDoesNotParseIsBadInput(t *testing.T) {
	t.Setenv("DROVER_NATS_URL", "")
	db := filepath.Join(t.TempDir(), "d.db")
	code, _, stderr := run(t, "worker", "--database-url", db, "--nats-url", "foo bar")
	want := `invalid nats-url: the URL does not parse: invalid character " " in host name`
	if code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("--nats-url %q: exit %d, stderr %q; want exit 2 with %q", "foo bar", code, stderr, want)
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("the database file was created before --nats-url was refused")
	}
	// Checked alone: a URL the NATS client would take for its default server
	// (nats:// with no host) would start a worker on a real NATS.
	for _, c := range []struct{ url, want string }{
		{"nats://127.0.0.1:4222,nats://u:secret@127.0.0.1:x", `invalid nats-url: URL 2 of 2 does not parse: invalid port ":x" after host`},
		{"nats://", "invalid nats-url: the URL names no host"},
		{"nats://127.0.0.1:4222, 127.0.0.1:4223", ""},
	} {
		err := checkNATSURL(c.url)
		if got := fmt.Sprint(err); (c.want == "") != (err == nil) || !strings.Contains(got, c.want) || strings.Contains(got, "secret") {
			t.Errorf("checkNATSURL(%q) = %v; want %q and no password", c.url, err, c.want)
		}
		if err != nil && !errors.Is(err, driver.ErrInvalidArgument) {
			t.Errorf("checkNATSURL(%q) = %v: not invalid input (exit 2)", c.url, err)
		}
	}
}
