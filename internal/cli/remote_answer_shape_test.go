package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An answer of another shape than the call's (a proxy's 200 {}, a server
// that is not Drover) is refused, saying so, by every command that prints
// what it reads: a cancel read it as "canceled job 0", a requeue as
// "requeued failed job 7 as job 0", a show as job 0, a purge as "purged 0
// failed jobs", a list as "no jobs", each exit 0, though nothing of the kind
// was done or so. An enqueue already refused one (j.ID < 1).
func TestRemoteCommandsRefuseAnAnswerOfAnotherShape(t *testing.T) {
	t.Parallel()
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(stub.Close)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"jobs", "cancel", "7"}, "POST /jobs/7/cancel answered 200 without a job"},
		{[]string{"dlq", "requeue", "7"}, "POST /dlq/7/requeue answered 200 without a job"},
		{[]string{"jobs", "show", "7"}, "GET /jobs/7 answered 200 without a job"},
		{[]string{"dlq", "purge"}, "DELETE /dlq answered 200 without the count purged"},
		{[]string{"jobs", "list"}, "GET /jobs answered 200 without a jobs list"},
		{[]string{"dlq", "list"}, "GET /dlq answered 200 without a jobs list"},
	} {
		code, stdout, stderr := run(t, append([]string{"--server", stub.URL}, c.args...)...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("drover %q against a 200 {}: exit %d, stdout %q, stderr %q; want 1, saying %q",
				c.args, code, stdout, stderr, c.want)
		}
	}
}

// A show whose job is answered but whose events are not ({}) says so, rather
// than print the job with no history.
func TestRemoteShowRefusesEventsOfAnotherShape(t *testing.T) {
	t.Parallel()
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/jobs/7" {
			_, _ = w.Write([]byte(`{"id":7,"kind":"email","queue":"default","status":"queued","attempt":0,"max_attempts":3,"args":{},"errors":[]}`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(stub.Close)
	code, stdout, stderr := run(t, "--server", stub.URL, "jobs", "show", "7")
	if want := "GET /jobs/7/events answered 200 without an events list"; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("drover jobs show 7 with events answered {}: exit %d, stdout %q, stderr %q; want 1, saying %q", code, stdout, stderr, want)
	}
}
