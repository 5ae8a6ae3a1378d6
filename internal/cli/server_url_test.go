package cli

import (
	"strings"
	"testing"
)

// A --server URL with credentials is refused without printing them, as
// drover worker --server refuses it: the jobs and dlq commands took it and
// printed the password in every error about the server ("error: server
// http://user:s3cret@…: … connection refused"). A query or fragment, which
// every request dropped, is refused as the worker refuses it.
func TestServerURLCredentialsAreRefusedUnprinted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{"http://user:s3cret@127.0.0.1:1", "pass credentials as a token"},
		{"http://user:s3cret@127.0.0.1:1/", "pass credentials as a token"},
		// A user alone is a token to some servers: url.Redacted kept it.
		{"http://s3cret@127.0.0.1:1", "pass credentials as a token"},
		{"http://u:s3cret word@[::1", "is not an http(s) URL"},
		{"ftp://u:s3cret@127.0.0.1:1", "is not an http(s) URL"},
		{"http://127.0.0.1:1/?queue=payments", "without a query or fragment"},
		{"http://127.0.0.1:1#frag", "without a query or fragment"},
	} {
		for _, args := range [][]string{{"jobs", "list"}, {"dlq", "purge"}, {"jobs", "enqueue", "echo"}} {
			code, stdout, stderr := run(t, append([]string{"--server", tc.url}, args...)...)
			if code != 2 || !strings.Contains(stderr, "invalid server") || !strings.Contains(stderr, tc.want) {
				t.Errorf("drover --server %q %q: exit %d, stdout %q, stderr %q; want exit 2 with %q", tc.url, args, code, stdout, stderr, tc.want)
			}
			if strings.Contains(stdout+stderr, "s3cret") {
				t.Errorf("drover --server %q %q printed the password: %q", tc.url, args, stdout+stderr)
			}
		}
	}
}
