package pgdriver_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// A listing that MaxBytes ends early leaves the rest of its rows unread:
// its query is canceled and its connection given up, where pgx would have
// received every row still to come (here ~10 MiB; with a thousand jobs of
// 1 MiB args, a gigabyte) to keep the connection. The pool has one
// connection, so the backend that answers next tells which happened.
func TestListCutByMaxBytesLeavesTheRestUnread(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(testdb.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	d := openURL(t, u.String())
	big := []byte(`{"s":"` + strings.Repeat("x", 256<<10) + `"}`)
	ps := make([]driver.InsertParams, 40)
	for i := range ps {
		ps[i] = driver.InsertParams{Kind: "k", Queue: "q", Args: big, MaxAttempts: 1}
	}
	if _, err := d.JobInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	backend := func() (pid int32) {
		t.Helper()
		if err := d.Pool().QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	list := func(p driver.ListParams, want int) {
		t.Helper()
		js, err := d.JobList(ctx, p)
		if err != nil || len(js) != want {
			t.Fatalf("JobList(limit %d, max_bytes %d): %d jobs, %v; want %d", p.Limit, p.MaxBytes, len(js), err, want)
		}
	}

	before := backend()
	list(driver.ListParams{Limit: 40, MaxBytes: 300 << 10}, 2)
	if after := backend(); after == before {
		t.Errorf("the listing cut after 2 of 40 jobs kept its connection (backend %d): it read the other 38 rows to keep it", before)
	}

	// Listings that end with their rows keep it.
	before = backend()
	list(driver.ListParams{Limit: 3}, 3)
	list(driver.ListParams{Limit: 3, MaxBytes: 100 << 20}, 3)
	if after := backend(); after != before {
		t.Errorf("a listing read to its end gave up its connection (backend %d, then %d)", before, after)
	}
}
