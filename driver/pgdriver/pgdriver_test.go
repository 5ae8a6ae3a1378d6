package pgdriver_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

func open(t testing.TB) *pgdriver.Driver {
	t.Helper()
	return openURL(t, testdb.PostgresURL(t))
}

// openURL opens a migrated driver on url, closed at the end of t.
func openURL(t testing.TB, url string) *pgdriver.Driver {
	t.Helper()
	d := openUnmigrated(t, url)
	if err := d.MigrateUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

// openUnmigrated opens a driver on url without migrating its database, closed
// at the end of t: for tests that migrate it themselves.
func openUnmigrated(t testing.TB, url string) *pgdriver.Driver {
	t.Helper()
	d, err := pgdriver.New(context.Background(), url, pgdriver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// insertWaiting enqueues n jobs of kind "k" into queue "q", 1,000 a statement.
func insertWaiting(t testing.TB, d *pgdriver.Driver, n int) {
	t.Helper()
	for done := 0; done < n; {
		ps := make([]driver.InsertParams, min(1000, n-done))
		for i := range ps {
			ps[i] = driver.InsertParams{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1}
		}
		if _, err := d.JobInsertMany(context.Background(), ps); err != nil {
			t.Fatal(err)
		}
		done += len(ps)
	}
}

func TestSmoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	res, err := d.JobInsertMany(ctx, []driver.InsertParams{
		{Kind: "echo", Queue: "default", Args: []byte(`{"a":1}`), MaxAttempts: 3, IdempotencyKey: "k"},
		{Kind: "echo", Queue: "default", Args: []byte(`{"a":2}`), MaxAttempts: 3},
		{Kind: "echo", Queue: "default", Args: []byte(`{"a":3}`), MaxAttempts: 3, IdempotencyKey: "k"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Existing || res[1].Existing || !res[2].Existing || res[2].Job.ID != res[0].Job.ID {
		t.Fatalf("idempotency: got %+v", res)
	}
	jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"default"}, Limit: 10, Owner: "w1"})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claim: %v %d", err, len(jobs))
	}
	j := jobs[0]
	fp := driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken}
	if _, err := d.JobStart(ctx, fp); err != nil {
		t.Fatal(err)
	}
	if _, err := d.JobHeartbeat(ctx, driver.HeartbeatParams{FenceParams: fp}); err != nil {
		t.Fatal(err)
	}
	done, err := d.JobComplete(ctx, driver.CompleteParams{FenceParams: fp, Result: []byte(`{"ok":true}`)})
	if err != nil || done.Status != lifecycle.StatusSucceeded {
		t.Fatalf("complete: %v %+v", err, done)
	}
	if _, err := d.JobComplete(ctx, driver.CompleteParams{FenceParams: fp}); !errors.Is(err, driver.ErrLeaseLost) {
		t.Fatalf("second complete: got %v, want ErrLeaseLost", err)
	}
	evs, err := d.JobEvents(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := lifecycle.CheckHistory(evs); err != nil {
		t.Fatalf("history: %v (%+v)", err, evs)
	}
	if len(evs) != 4 {
		t.Fatalf("events: got %d, want 4: %+v", len(evs), evs)
	}
	if err := lifecycle.CheckInvariants(done.State()); err != nil {
		t.Fatal(err)
	}
}

// A pool Drover opens runs with JIT off unless the URL asks for it: a JIT compile
// costs tens of milliseconds that a short statement never repays.
func TestNewTurnsJITOffUnlessTheURLSetsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := testdb.PostgresURL(t)
	for _, tc := range []struct{ jit, want string }{{"", "off"}, {"on", "on"}} {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		if tc.jit != "" {
			q := u.Query()
			q.Set("jit", tc.jit)
			u.RawQuery = q.Encode()
		}
		d, err := pgdriver.New(ctx, u.String(), pgdriver.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = d.Pool().QueryRow(ctx, "SHOW jit").Scan(&got)
		_ = d.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("jit with URL jit=%q: %q, want %q", tc.jit, got, tc.want)
		}
	}
}

// A claim naming several queues reads its candidates without locks. One that
// another transaction holds when the claim locks it is skipped, and the claim
// asks again past it, so it still returns LIMIT jobs while enough are ready.
func TestClaimQueuesPastHeldCandidate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	res, err := d.JobInsertMany(ctx, []driver.InsertParams{
		{Kind: "k", Queue: "a", Args: []byte(`{}`), MaxAttempts: 3},
		{Kind: "k", Queue: "a", Args: []byte(`{}`), MaxAttempts: 3},
		{Kind: "k", Queue: "b", Args: []byte(`{}`), MaxAttempts: 3},
		{Kind: "k", Queue: "b", Args: []byte(`{}`), MaxAttempts: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := func(i int) int64 { return res[i].Job.ID }

	// Another claimer holds the first two in claim order (one statement, one
	// now(): by id): a claim locks the jobs' ready rows first.
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM drover_ready WHERE id = ANY($1) FOR UPDATE", []int64{id(0), id(1)}); err != nil {
		t.Fatal(err)
	}

	claim := func(limit int) []int64 {
		t.Helper()
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"a", "b"}, Limit: limit, Owner: "w", Start: true})
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int64, len(jobs))
		for i, j := range jobs {
			ids[i] = j.ID
			if j.Status != lifecycle.StatusRunning || j.Owner != "w" {
				t.Errorf("claimed job %d: status %s owner %q, want running by w", j.ID, j.Status, j.Owner)
			}
		}
		return ids
	}
	if got, want := claim(2), []int64{id(2), id(3)}; !slices.Equal(got, want) {
		t.Fatalf("claim of 2 past 2 held candidates = %v, want %v", got, want)
	}
	if got := claim(5); len(got) != 0 {
		t.Fatalf("claim while the only ready jobs are held = %v, want none", got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := claim(5), []int64{id(0), id(1)}; !slices.Equal(got, want) {
		t.Fatalf("claim after the holder let go = %v, want %v", got, want)
	}
}

// A search_path that names no schema that exists leaves current_schema() NULL:
// New said "cannot scan NULL into *string", which does not say what is wrong.
// It names search_path now, and what to do.
func TestSearchPathWithoutASchema(t *testing.T) {
	t.Parallel()
	testdb.PostgresURL(t) // fails in CI, skips elsewhere, when PostgreSQL is unreachable
	url := testdb.WithSearchPath(testdb.PostgresBaseURL(), "drover_no_such_schema")
	_, err := pgdriver.New(context.Background(), url, pgdriver.Options{})
	if err == nil || !strings.Contains(err.Error(), "search_path") || !strings.Contains(err.Error(), "CREATE SCHEMA") {
		t.Fatalf("New with a search_path of no existing schema: %v; want an error naming search_path and how to fix it", err)
	}
}
