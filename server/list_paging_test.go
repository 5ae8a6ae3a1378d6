package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// listPage is a page of GET /jobs or GET /dlq.
type listPage struct {
	Jobs []struct {
		ID int64 `json:"id"`
	} `json:"jobs"`
	NextCursor *string `json:"next_cursor"`
}

func getPage(t *testing.T, s *Server, target string) listPage {
	t.Helper()
	st, _, b := call(t, s, "GET", target, "", nil)
	if st != http.StatusOK {
		t.Fatalf("GET %s = %d %s", target, st, b)
	}
	var p listPage
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("GET %s: %v\n%s", target, err, b)
	}
	return p
}

// walk pages through base (a path with a query) with limit, following
// next_cursor, and returns the ids in order and the number of pages read.
func walk(t *testing.T, s *Server, base string, limit int) ([]int64, int) {
	t.Helper()
	var ids []int64
	cursor := ""
	for pages := 1; ; pages++ {
		target := fmt.Sprintf("%s&limit=%d%s", base, limit, cursor)
		p := getPage(t, s, target)
		if len(p.Jobs) == 0 {
			t.Errorf("GET %s: an empty page, reached by following next_cursor (the page before it was the last, and said it was not)", target)
		}
		for _, j := range p.Jobs {
			ids = append(ids, j.ID)
		}
		if p.NextCursor == nil {
			return ids, pages
		}
		if pages > 100 {
			t.Fatalf("GET %s: still a next_cursor after 100 pages", target)
		}
		cursor = "&cursor=" + *p.NextCursor
	}
}

// TestListNextCursorNullOnLastPage: next_cursor is null on the last page, as
// openapi.json says ("null on the last page"), also when the jobs fill it
// exactly; the last page pointed to one more, empty page.
func TestListNextCursorNullOnLastPage(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			ctx := context.Background()
			var want, failed []int64
			for i := 0; i < 6; i++ {
				r, err := s.client.Enqueue(ctx, "paged", nil, &drover.EnqueueOpts{MaxAttempts: 1})
				if err != nil {
					t.Fatal(err)
				}
				want = append([]int64{r.Job.ID}, want...) // newest first
				if i%2 == 0 {
					continue
				}
				jobs, err := s.drv.JobClaim(ctx, driver.ClaimParams{ID: r.Job.ID, Limit: 1, Owner: "w", Start: true})
				if err != nil || len(jobs) != 1 {
					t.Fatalf("claim job %d: %v, %v", r.Job.ID, jobs, err)
				}
				j := jobs[0]
				if _, err := s.drv.JobFail(ctx, driver.FailParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt,
					LeaseToken: j.LeaseToken}, Error: "boom", Permanent: true}); err != nil {
					t.Fatal(err)
				}
				failed = append([]int64{j.ID}, failed...)
			}
			for _, tc := range []struct {
				base string
				want []int64
			}{{"/jobs?kind=paged", want}, {"/dlq?kind=paged", failed}, {"/jobs?status=failed", failed}} {
				for limit := 1; limit <= len(tc.want)+1; limit++ {
					ids, pages := walk(t, s, tc.base, limit)
					if fmt.Sprint(ids) != fmt.Sprint(tc.want) {
						t.Errorf("%s by pages of %d: ids %v, want %v", tc.base, limit, ids, tc.want)
					}
					if wantPages := max(1, (len(tc.want)+limit-1)/limit); pages != wantPages {
						t.Errorf("%s by pages of %d: %d pages, want %d", tc.base, limit, pages, wantPages)
					}
				}
			}
			// The largest page: one job more than it is asked is read, not refused.
			if p := getPage(t, s, "/jobs?limit=1000"); len(p.Jobs) != len(want) || p.NextCursor != nil {
				t.Errorf("GET /jobs?limit=1000: %d jobs, next_cursor %v; want %d and null", len(p.Jobs), p.NextCursor, len(want))
			}
		})
	}
}
