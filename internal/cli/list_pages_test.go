package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/server"
)

// TestListPagesOfLargeJobs: jobs list and dlq list on the database, and jobs
// list through a server (dlq list shares its reading of a page), answer pages
// bounded in bytes of args as well as by --limit (server.DefaultMaxPageBytes
// on the database, the server's MaxPageBytes through it), where --limit 1000
// read a thousand jobs of ~1 MiB at once. They say when more follow and how to see them, also on a page
// shorter than --limit, and say nothing on the last. Paging with --after
// shows every job once.
func TestListPagesOfLargeJobs(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			db, drv, c := migratedClient(t, kind)
			// Big jobs, 18 MiB of args in all, failed, for the database's
			// bound; small ones, 1 MiB in all, for a server's of 250 KiB
			// (through a server every byte is JSON twice, slow under -race).
			enqueue := func(kind string, n, size int, fail bool) (ids []int64) {
				args := json.RawMessage(`{"s":"` + strings.Repeat("x", size) + `"}`)
				for range n {
					r, err := c.Enqueue(context.Background(), kind, args, &drover.EnqueueOpts{MaxAttempts: 1})
					if err != nil {
						t.Fatal(err)
					}
					if fail {
						failJob(t, drv, r.Job.ID)
					}
					ids = append(ids, r.Job.ID)
				}
				slices.Reverse(ids) // newest first
				return ids
			}
			big := enqueue("big", 20, 900<<10, true)
			small := enqueue("small", 10, 100<<10, false)
			srv := server.New(c, server.Config{MaxPageBytes: 250 << 10})
			t.Cleanup(srv.Close)
			hs := httptest.NewServer(srv)
			t.Cleanup(hs.Close)
			hint := regexp.MustCompile(`there are more: --after (\d+)`)
			for _, tc := range []struct {
				args        []string
				want        []int64
				size, bound int
			}{
				{[]string{"--database-url", db, "jobs", "list", "--kind", "big"}, big, 900 << 10, server.DefaultMaxPageBytes},
				{[]string{"--database-url", db, "dlq", "list"}, big, 900 << 10, server.DefaultMaxPageBytes},
				{[]string{"--server", hs.URL, "jobs", "list", "--kind", "small"}, small, 100 << 10, 250 << 10},
			} {
				name := strings.Join(tc.args[2:], " ") + " on " + tc.args[0]
				var got []int64
				after := ""
				for page := 0; ; page++ {
					if page > len(tc.want) {
						t.Fatalf("%s: paging does not end", name)
					}
					args := append(slices.Clone(tc.args), "--limit", "1000")
					if after != "" {
						args = append(args, "--after", after)
					}
					code, stdout, stderr := run(t, args...)
					if code != 0 {
						t.Fatalf("%s: exit %d: %s", name, code, stderr)
					}
					ids := tableIDs(t, stdout)
					if len(ids) > 1 && len(ids)*tc.size > tc.bound {
						t.Errorf("%s: a page of %d jobs, ~%d bytes of args, over %d", name, len(ids), len(ids)*tc.size, tc.bound)
					}
					got = append(got, ids...)
					m := hint.FindStringSubmatch(stderr)
					if m == nil {
						break
					}
					if len(ids) == 0 || m[1] != fmt.Sprint(ids[len(ids)-1]) {
						t.Fatalf("%s: hint %q after jobs %v", name, m[0], ids)
					}
					after = m[1]
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("%s: pages showed %v, want every job once, newest first: %v", name, got, tc.want)
				}
			}
		})
	}
}

// tableIDs reads the first column of a table's rows, under its header.
func tableIDs(t *testing.T, table string) []int64 {
	t.Helper()
	var ids []int64
	lines := strings.Split(strings.TrimSpace(table), "\n")
	for _, l := range lines[1:] {
		id, err := strconv.ParseInt(strings.Fields(l)[0], 10, 64)
		if err != nil {
			t.Fatalf("table row %q: %v", l, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// migratedClient opens a fresh database of kind, migrated, and a client on
// it: its URL for the command's --database-url, its driver and the client.
func migratedClient(t *testing.T, kind string) (string, driver.Driver, *drover.Client) {
	t.Helper()
	db := testdb.URL(t, kind)
	drv := testdb.OpenURL(t, kind, db)
	c, err := drover.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db, drv, c
}
