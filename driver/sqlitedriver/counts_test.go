package sqlitedriver

import (
	"fmt"
	"testing"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// Migration 013 counts the jobs already there, and the driver keeps the
// counts from then on: QueueList answers them (not a scan of the jobs), they
// agree with the jobs, and 013 down takes the table away. The conformance
// suite checks the counts (CheckInvariants) after every one of its tests, so
// every statement that changes jobs is checked there.
func TestMigration013CountsTheJobsThereAre(t *testing.T) {
	f := newFixture(t)
	migrateTo(t, f.d, 12)
	// Jobs written before 013, whole: the driver's statements keep counts
	// that 012 has no table for.
	for i, row := range []struct{ queue, status, extra string }{
		{"a", "queued", ""}, {"a", "queued", ""}, {"a", "succeeded", ", result, finished_at) VALUES (?, ?, ?, 0, 3, 0, 'null', 0)"},
		{"b", "failed", ", error, finished_at) VALUES (?, ?, ?, 0, 3, 0, 'boom', 0)"}, {"b", "queued", ""},
	} {
		q := "INSERT INTO drover_jobs (kind, queue, status, run_at, max_attempts, created_at) VALUES (?, ?, ?, 0, 3, 0)"
		if row.extra != "" {
			q = "INSERT INTO drover_jobs (kind, queue, status, run_at, max_attempts, created_at" + row.extra
		}
		if _, err := f.d.write.ExecContext(f.ctx, q, fmt.Sprint("k", i), row.queue, row.status); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.d.MigrateUp(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.d.CheckInvariants(f.ctx); err != nil {
		t.Errorf("after 013 up: %v", err)
	}
	want := map[string]map[lifecycle.Status]int{"a": {"queued": 2, "succeeded": 1}, "b": {"failed": 1, "queued": 1}}
	queues := func(when string, want map[string]map[lifecycle.Status]int) {
		t.Helper()
		qs, err := f.d.QueueList(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]map[lifecycle.Status]int{}
		for _, q := range qs {
			got[q.Name] = q.Counts
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("QueueList %s = %v, want %v", when, got, want)
		}
	}
	queues("after 013 up", want)

	// The counts are the table's, not a scan's: a row the driver did not
	// write is not in them until a check says so.
	if _, err := f.d.write.ExecContext(f.ctx, "INSERT INTO drover_jobs (kind, queue, status, run_at, max_attempts, created_at) VALUES ('k', 'c', 'queued', 0, 3, 0)"); err != nil {
		t.Fatal(err)
	}
	queues("after a row written behind the driver's back", want)
	if err := f.d.CheckInvariants(f.ctx); err == nil {
		t.Error("CheckInvariants found nothing wrong with a job the counts do not hold")
	}
	if _, err := f.d.write.ExecContext(f.ctx, "DELETE FROM drover_jobs WHERE queue = 'c'"); err != nil {
		t.Fatal(err)
	}

	// The driver's own changes are counted: an enqueue, a claim, a purge.
	f.enqueue(func(p *driver.InsertParams) { p.Queue = "b" })
	f.claim(driver.ClaimParams{Queues: []string{"b"}, Limit: 1, Owner: "w"})
	if _, err := f.d.JobDLQPurge(f.ctx, driver.DLQPurgeParams{Queue: "b"}); err != nil {
		t.Fatal(err)
	}
	queues("after an enqueue, a claim and a purge", map[string]map[lifecycle.Status]int{
		"a": {"queued": 2, "succeeded": 1}, "b": {"claimed": 1, "queued": 1}})
	if err := f.d.CheckInvariants(f.ctx); err != nil {
		t.Error(err)
	}

	migrateTo(t, f.d, 12)
	var n int
	if err := f.d.write.QueryRowContext(f.ctx, "SELECT count(*) FROM sqlite_schema WHERE name = 'drover_job_counts'").Scan(&n); err != nil || n != 0 {
		t.Errorf("after 013 down: drover_job_counts is there %d times, %v; want gone", n, err)
	}
}
