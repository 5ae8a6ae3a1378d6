package cli

import (
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
	"github.com/drover-dev/drover/server"
)

// A DLQ purge on SQLite deletes in batches of 1,000, each its own
// transaction: one that fails part way (a busy timeout, a canceled request)
// leaves the batches that committed purged. The error says how many were, as
// the command does run locally and through the server. Before, the count was
// dropped: the command said only the error, and the server answered 500
// "internal error", so an operator could not know that 1,000 failed jobs,
// the DLQ's only record of them, were gone. Here the purge's second batch is
// refused by a trigger on its one job.
func TestDLQPurgeStoppedPartWaySaysHowManyWerePurged(t *testing.T) {
	t.Parallel()
	const want = "1000 failed jobs were purged before the error"
	for _, remote := range []bool{false, true} {
		t.Run(fmt.Sprintf("remote=%v", remote), func(t *testing.T) {
			t.Parallel()
			db := testdb.URL(t, "sqlite")
			drv := testdb.OpenURL(t, "sqlite", db)
			last := failedJobs(t, drv, 1001)
			hold := fmt.Sprintf(`CREATE TRIGGER test_hold BEFORE DELETE ON drover_jobs WHEN old.id = %d
				BEGIN SELECT RAISE(ABORT, 'the test holds this job'); END`, last)
			if _, err := drv.(interface{ DB() *sql.DB }).DB().Exec(hold); err != nil {
				t.Fatal(err)
			}
			args := []string{"--database-url", db}
			if remote {
				c, err := drover.NewClient(drv, nil)
				if err != nil {
					t.Fatal(err)
				}
				srv := server.New(c, server.Config{})
				hs := httptest.NewServer(srv)
				t.Cleanup(func() { hs.Close(); srv.Close() })
				args = []string{"--server", hs.URL}
			}
			code, stdout, stderr := run(t, append(args, "dlq", "purge", "--yes")...)
			if code != 1 || !strings.Contains(stderr, want) {
				t.Errorf("dlq purge stopped after its first batch: exit %d, stdout %q, stderr %q; want 1, saying %q",
					code, stdout, stderr, want)
			}
			left, err := drv.JobList(context.Background(), driver.ListParams{Statuses: []lifecycle.Status{lifecycle.StatusFailed}, Limit: 10})
			if err != nil || len(left) != 1 || left[0].ID != last {
				t.Errorf("failed jobs left: %d (%v); want the one held, %d", len(left), err, last)
			}
		})
	}
}

// failedJobs leaves n jobs failed (run once, their lease expired two days
// ago, reaped) and answers the last one's id.
func failedJobs(t *testing.T, d driver.Driver, n int) int64 {
	t.Helper()
	ctx := context.Background()
	past := time.Now().Add(-48 * time.Hour)
	runAt := past.Add(-time.Hour)
	var last int64
	for done := 0; done < n; done += 1000 {
		ps := make([]driver.InsertParams, min(1000, n-done))
		for i := range ps {
			ps[i] = driver.InsertParams{Kind: "pay", Queue: "old", Args: []byte(`{}`), MaxAttempts: 1, RunAt: &runAt}
		}
		if _, err := d.JobInsertMany(ctx, ps); err != nil {
			t.Fatal(err)
		}
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"old"}, Limit: len(ps), Owner: "w", Start: true,
			LeaseDuration: time.Minute, Now: &past})
		if err != nil || len(jobs) != len(ps) {
			t.Fatalf("claim: %d jobs, %v; want %d", len(jobs), err, len(ps))
		}
		for _, j := range jobs {
			last = max(last, j.ID)
		}
	}
	later := past.Add(time.Hour)
	for reaped := 0; reaped < n; {
		jobs, err := d.JobReapExpired(ctx, driver.ReapParams{Limit: 1000, Now: &later})
		if err != nil || len(jobs) == 0 {
			t.Fatalf("reap: %d jobs, %v after %d; want %d in all", len(jobs), err, reaped, n)
		}
		reaped += len(jobs)
	}
	return last
}
