package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// A page of GET /jobs ends where its jobs' args would weigh more than
// MaxPageBytes, with a next_cursor to the rest, whatever ?limit= allows: a
// thousand jobs of 1 MiB args were read, held and encoded in one answer.
// Paging on reaches every job once, in order; a job larger than the bound
// comes alone; the last page's next_cursor is null.
func TestJobsPageEndsAtMaxPageBytes(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			const bound = 10 << 10
			s := newTestServerOn(t, kind, Config{MaxPageBytes: bound})
			ts := httptest.NewServer(s)
			t.Cleanup(ts.Close)
			sizes := []int{3 << 10, 3 << 10, 3 << 10, 3 << 10, 20 << 10, 10, 10, 4 << 10, 4 << 10, 4 << 10, 10}
			var want []int64
			for _, n := range sizes {
				res, err := s.client.Enqueue(context.Background(), "page", map[string]string{"s": strings.Repeat("x", n)}, nil)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, res.Job.ID)
			}
			slices.Reverse(want) // newest first
			var got []int64
			target := ts.URL + "/jobs?kind=page&limit=1000"
			for page := 0; ; page++ {
				if page > len(sizes) {
					t.Fatalf("paging does not end: %v so far", got)
				}
				resp, err := http.Get(target)
				if err != nil {
					t.Fatal(err)
				}
				var p struct {
					Jobs       []*drover.Job `json:"jobs"`
					NextCursor *string       `json:"next_cursor"`
				}
				err = json.NewDecoder(resp.Body).Decode(&p)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || err != nil {
					t.Fatalf("GET %s: %d, %v", target, resp.StatusCode, err)
				}
				weight := 0
				for _, j := range p.Jobs {
					weight += len(j.Args)
					got = append(got, j.ID)
				}
				if len(p.Jobs) > 1 && weight > bound {
					t.Errorf("page %d: %d jobs whose args weigh %d bytes, over MaxPageBytes %d", page, len(p.Jobs), weight, bound)
				}
				if p.NextCursor == nil {
					break
				}
				if len(p.Jobs) == 0 {
					t.Fatalf("page %d: no jobs, and a next_cursor %q", page, *p.NextCursor)
				}
				target = fmt.Sprintf("%s/jobs?kind=page&limit=1000&cursor=%s", ts.URL, *p.NextCursor)
			}
			if !slices.Equal(got, want) {
				t.Errorf("pages gave %v, want every job once, newest first: %v", got, want)
			}
		})
	}
}
