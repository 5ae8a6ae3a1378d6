package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/server"
)

// A --server that answers with a redirect (a proxy sending http to https, an
// old address) is refused, naming where it points: the HTTP client followed a
// 301 or 302 with a GET, so an enqueue became GET /jobs, whose list was read
// as a job with id 0 ("job 0 exists already …; nothing enqueued", exit 0, no
// job written), and a purge became GET /dlq ("purged 0 failed jobs", exit 0,
// nothing purged).
func TestRemoteRedirectIsRefused(t *testing.T) {
	t.Parallel()
	drv := testdb.Open(t, "sqlite")
	c, err := drover.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(c, server.Config{})
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ctx := context.Background()
	res, err := c.Enqueue(ctx, "fail", nil, &drover.EnqueueOpts{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	failJob(t, drv, res.Job.ID)

	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect} {
		redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, hs.URL+r.URL.RequestURI(), status)
		}))
		t.Cleanup(redir.Close)
		for _, args := range [][]string{
			{"jobs", "enqueue", "echo"},
			{"-o", "json", "jobs", "enqueue", "echo"},
			{"dlq", "purge"},
			{"jobs", "cancel", "1"},
		} {
			code, stdout, stderr := run(t, append([]string{"--server", redir.URL}, args...)...)
			if code == 0 || !strings.Contains(stderr, "redirect") || !strings.Contains(stderr, hs.URL) {
				t.Errorf("%d: drover %q: exit %d, stdout %q, stderr %q; want a failure naming the redirect to %s",
					status, args, code, stdout, stderr, hs.URL)
			}
		}
	}
	jobs, err := drv.JobList(ctx, driver.ListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].Status != "failed" {
		t.Errorf("after the redirected calls the database holds %d jobs (first %v), want the one failed job, untouched", len(jobs), jobs[0].Status)
	}
}
