package pgdriver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/lifecycle"
)

// counts is QueueList as queue → status → count.
func counts(t *testing.T, d *pgdriver.Driver) map[string]map[lifecycle.Status]int {
	t.Helper()
	qs, err := d.QueueList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[lifecycle.Status]int{}
	for _, q := range qs {
		out[q.Name] = q.Counts
	}
	return out
}

// pendingChanges is the number of count changes not yet folded.
func pendingChanges(t *testing.T, d *pgdriver.Driver) int {
	t.Helper()
	var n int
	if err := d.Pool().QueryRow(context.Background(), "SELECT count(*) FROM drover_job_count_changes").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// QueueList reads the counts migration 017 keeps, not the jobs: they agree
// with the jobs through every kind of change, while folds run beside the
// changes, and a fold moves the changes into the counts without changing what
// QueueList answers.
func TestJobCountsFollowTheJobsThroughConcurrentChangesAndFolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	insertWaiting(t, d, 300)
	if pendingChanges(t, d) == 0 {
		t.Fatal("an insert appended no count change")
	}
	before := counts(t, d)
	if err := d.FoldJobCounts(ctx); err != nil {
		t.Fatal(err)
	}
	if n := pendingChanges(t, d); n != 0 {
		t.Errorf("%d count changes left after a fold, want none", n)
	}
	if after := counts(t, d); fmt.Sprint(after) != fmt.Sprint(before) || after["q"][lifecycle.StatusQueued] != 300 {
		t.Errorf("QueueList before a fold %v, after it %v; want 300 queued both times", before, after)
	}

	// Four workers claim, complete, fail, snooze and cancel while two folders
	// fold as fast as they can.
	var workers, folders sync.WaitGroup
	stop := make(chan struct{})
	for f := range 2 {
		folders.Add(1)
		go func() {
			defer folders.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := d.FoldJobCounts(ctx); err != nil {
					t.Errorf("folder %d: %v", f, err)
					return
				}
			}
		}()
	}
	for w := range 4 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := 0; ; i++ {
				jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 5, Owner: fmt.Sprint("w", w), Start: true})
				if err != nil {
					t.Errorf("worker %d: claim: %v", w, err)
					return
				}
				if len(jobs) == 0 {
					return
				}
				for k, j := range jobs {
					f := fence(j, "")
					switch (i + k) % 5 {
					case 0:
						_, err = d.JobFail(ctx, driver.FailParams{FenceParams: f, Error: "boom", Permanent: true})
					case 1:
						_, err = d.JobCancel(ctx, driver.CancelParams{ID: j.ID})
					case 2:
						if j.Attempt < 3 {
							_, err = d.JobSnooze(ctx, driver.SnoozeParams{FenceParams: f})
							break
						}
						fallthrough
					default:
						_, err = d.JobComplete(ctx, driver.CompleteParams{FenceParams: f, Result: json.RawMessage(`{}`)})
					}
					if err != nil {
						t.Errorf("worker %d: job %d: %v", w, j.ID, err)
						return
					}
				}
			}
		}()
	}
	workers.Wait()
	// A job snoozed after the last worker found none waits: finish it.
	for {
		jobs, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: 100, Owner: "last", Start: true})
		if err != nil || len(jobs) == 0 {
			if err != nil {
				t.Error(err)
			}
			break
		}
		for _, j := range jobs {
			if _, err := d.JobComplete(ctx, driver.CompleteParams{FenceParams: fence(j, ""), Result: json.RawMessage(`{}`)}); err != nil {
				t.Error(err)
			}
		}
	}
	close(stop)
	folders.Wait()
	if err := d.CheckInvariants(ctx); err != nil {
		t.Fatal(err)
	}
	got := counts(t, d)["q"]
	total := 0
	for _, st := range []lifecycle.Status{lifecycle.StatusSucceeded, lifecycle.StatusFailed, lifecycle.StatusCanceled} {
		if got[st] == 0 {
			t.Errorf("no %s job counted: %v", st, got)
		}
		total += got[st]
	}
	if total != 300 || len(got) != 3 {
		t.Errorf("counts %v; want the 300 jobs succeeded, failed or canceled", got)
	}

	// A purge and retention take their jobs out of the counts.
	if _, err := d.JobDLQPurge(ctx, driver.DLQPurgeParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.JobDeleteFinished(ctx, driver.DeleteFinishedParams{Before: time.Now().Add(time.Hour), Limit: 1000}); err != nil {
		t.Fatal(err)
	}
	if got := counts(t, d); len(got) != 0 {
		t.Errorf("counts after the purge and retention: %v, want no queue", got)
	}
	if err := d.CheckInvariants(ctx); err != nil {
		t.Error(err)
	}
}

// Migration 017 counts the jobs that were there before it.
func TestMigration017CountsTheJobsThere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t)
	insertWaiting(t, d, 7)
	jobs := runningJobs(t, d, 3)
	if _, err := d.JobComplete(ctx, driver.CompleteParams{FenceParams: fence(jobs[0], ""), Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	want := counts(t, d)
	if err := d.MigrateTo(16); err != nil {
		t.Fatal(err)
	}
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := counts(t, d); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts after migrating down to 016 and up: %v, want %v", got, want)
	}
	if err := d.CheckInvariants(ctx); err != nil {
		t.Error(err)
	}
}
