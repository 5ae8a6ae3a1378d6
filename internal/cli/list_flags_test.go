package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/server"
)

// TestListFlagsRepeated: a list command given a filter flag twice answers
// what the HTTP API answers for the query parameter given twice, on the
// database and through a server: --status repeated lists every status named
// (as ?status=a&status=b does), and --queue, --kind, --limit or --after
// repeated is refused, exit 2, naming the flag (as ?queue=a&queue=b is a
// 400), where the flag package kept the last value without a word.
func TestListFlagsRepeated(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			db, drv, c := migratedClient(t, kind)
			ctx := context.Background()
			var queued, failed, canceled []int64
			for i, q := range []string{"a", "b", "a", "b", "a", "b"} {
				r, err := c.Enqueue(ctx, "rep", nil, &drover.EnqueueOpts{Queue: q, MaxAttempts: 1})
				if err != nil {
					t.Fatal(err)
				}
				switch i % 3 {
				case 0:
					queued = append(queued, r.Job.ID)
				case 1:
					failJob(t, drv, r.Job.ID)
					failed = append(failed, r.Job.ID)
				case 2:
					if _, err := c.Cancel(ctx, r.Job.ID); err != nil {
						t.Fatal(err)
					}
					canceled = append(canceled, r.Job.ID)
				}
			}
			srv := server.New(c, server.Config{})
			t.Cleanup(srv.Close)
			hs := httptest.NewServer(srv)
			t.Cleanup(hs.Close)

			api := func(query string) (int, []int64) {
				t.Helper()
				resp, err := http.Get(hs.URL + "/jobs?" + query)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				var p struct {
					Jobs []struct {
						ID int64 `json:"id"`
					} `json:"jobs"`
				}
				_ = json.Unmarshal(b, &p)
				var ids []int64
				for _, j := range p.Jobs {
					ids = append(ids, j.ID)
				}
				return resp.StatusCode, ids
			}
			want := slices.Concat(failed, canceled)
			slices.Sort(want)
			slices.Reverse(want)
			if code, ids := api("status=failed&status=canceled"); code != 200 || fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Fatalf("GET /jobs?status=failed&status=canceled = %d %v, want 200 %v", code, ids, want)
			}
			if code, _ := api("queue=a&queue=b"); code != 400 {
				t.Fatalf("GET /jobs?queue=a&queue=b = %d, want 400", code)
			}

			for _, where := range [][]string{{"--database-url", db}, {"--server", hs.URL}} {
				cli := func(args ...string) (int, string, string) { return run(t, append(slices.Clone(where), args...)...) }
				code, stdout, stderr := cli("-o", "json", "jobs", "list", "--kind", "rep", "--status", "failed", "--status", "canceled")
				var jobs []struct {
					ID int64 `json:"id"`
				}
				if code != 0 || json.Unmarshal([]byte(stdout), &jobs) != nil {
					t.Fatalf("%s jobs list --status failed --status canceled: exit %d, %q, %s", where[0], code, stdout, stderr)
				}
				var ids []int64
				for _, j := range jobs {
					ids = append(ids, j.ID)
				}
				if fmt.Sprint(ids) != fmt.Sprint(want) {
					t.Errorf("%s jobs list --status failed --status canceled: jobs %v, want %v (GET /jobs?status=failed&status=canceled's)", where[0], ids, want)
				}
				for _, args := range [][]string{
					{"jobs", "list", "--queue", "a", "--queue", "b"},
					{"jobs", "list", "--kind", "rep", "--kind", "other"},
					{"jobs", "list", "--limit", "5", "--limit", "1"},
					{"jobs", "list", "--after", "9", "--after", "3"},
					{"dlq", "list", "--queue", "a", "--queue", "b"},
					{"dlq", "list", "--limit", "5", "--limit", "1"},
					{"dlq", "purge", "--queue", "a", "--queue", "b"},
				} {
					code, stdout, stderr := cli(args...)
					if code != 2 || !strings.Contains(stderr, args[2]) || !strings.Contains(stderr, "more than once") {
						t.Errorf("%s drover %s: exit %d, stdout %q, stderr %q; want 2, refusing %s given twice",
							where[0], strings.Join(args, " "), code, truncate(stdout, 200), stderr, args[2])
					}
				}
			}
			// The refused purge purged nothing.
			if jobs, err := c.DLQList(ctx, "", 0, 0); err != nil || len(jobs) != len(failed) {
				t.Errorf("DLQ after the refused purges: %d jobs, %v; want %d", len(jobs), err, len(failed))
			}
		})
	}
}
