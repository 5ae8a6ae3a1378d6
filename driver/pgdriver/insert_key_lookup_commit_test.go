package pgdriver_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// A batch mixing a job without a key and one whose key exists, whose ctx
// ends (a deadline, a client that hung up) just before the read of the
// existing keys, enqueues nothing: its error means what it says. The insert
// committed on its own before that read, so JobInsertMany answered an error
// with the unkeyed job committed, and a caller that retried, as an error
// invites, enqueued it twice, with no key to learn the outcome by (helper-79).
func TestKeyedBatchWhoseKeyReadFailsEnqueuesNothing(t *testing.T) {
	url := testdb.PostgresURL(t)
	openURL(t, url) // migrates
	tr := &beforeKeyLookup{}
	_, d := tracedDriver(t, url, tr)
	job := func(kind, key string) driver.InsertParams {
		return driver.InsertParams{Kind: kind, Queue: "q", Args: json.RawMessage(`{}`), MaxAttempts: 1, IdempotencyKey: key}
	}
	bg := context.Background()
	if _, err := d.JobInsertMany(bg, []driver.InsertParams{job("charge", "order-1")}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	tr.hook = cancel
	tr.armed.Store(true)
	batch := []driver.InsertParams{job("email", ""), job("charge", "order-1")}
	_, err := d.JobInsertMany(ctx, batch)
	if tr.armed.Load() {
		t.Fatal("the hook did not run")
	}
	emails, lerr := d.JobList(bg, driver.ListParams{Kind: "email", Limit: 10})
	if lerr != nil {
		t.Fatal(lerr)
	}
	if err == nil {
		t.Fatalf("JobInsertMany succeeded on a ctx canceled before its read of the existing keys; want its error")
	}
	if len(emails) != 0 {
		t.Errorf("JobInsertMany answered %q, yet committed %d email job(s) (id %d): a retry enqueues it again", err, len(emails), emails[0].ID)
	}
}
