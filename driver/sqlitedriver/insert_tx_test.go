package sqlitedriver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/drover-dev/drover/driver"
)

// endsAfter is a context that ends once its Done has been asked for k times: a
// deadline that passes at a chosen point inside a driver call.
type endsAfter struct {
	context.Context
	k     int64
	calls atomic.Int64
	once  sync.Once
	ended atomic.Bool
	ch    chan struct{}
}

func newEndsAfter(k int64) *endsAfter {
	return &endsAfter{Context: context.Background(), k: k, ch: make(chan struct{})}
}

func (c *endsAfter) Done() <-chan struct{} {
	if c.calls.Add(1) > c.k {
		c.once.Do(func() { c.ended.Store(true); close(c.ch) })
	}
	return c.ch
}

func (c *endsAfter) Err() error {
	if c.ended.Load() {
		return context.Canceled
	}
	return nil
}

// JobInsertManyTx either inserts its jobs with their enqueue events or leaves
// nothing in the caller's transaction, wherever its context ends: a caller that
// commits its own work after a failed enqueue commits no job, and none without
// its event. Its statements used to run bare in the caller's transaction, where
// a failed one does not undo the ones before it.
func TestJobInsertManyTxLeavesNothingWhenItFails(t *testing.T) {
	d := openTest(t)
	ctx := context.Background()
	if _, err := d.DB().ExecContext(ctx, "CREATE TABLE own_work (k INTEGER)"); err != nil {
		t.Fatal(err)
	}
	failed, committedAfterFailure := 0, 0
	for k := int64(1); k < 80; k++ {
		tx, err := d.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO own_work VALUES (?)", k); err != nil {
			t.Fatal(err)
		}
		queue := "tx" + string(rune('a'+k%26)) + string(rune('a'+k/26))
		res, ierr := d.JobInsertManyTx(newEndsAfter(k), tx, []driver.InsertParams{params(queue), params(queue)})
		// SQLite rolls a whole transaction back when a statement in it is
		// interrupted (a context ending mid-statement): then the caller's
		// commit fails, and nothing of it stays, which is all or nothing too.
		cerr := tx.Commit()
		if cerr != nil && ierr == nil {
			t.Fatalf("k=%d: the caller's commit failed (%v) after JobInsertManyTx succeeded", k, cerr)
		}
		var own int
		if err := d.DB().QueryRowContext(ctx, "SELECT count(*) FROM own_work WHERE k = ?", k).Scan(&own); err != nil || (own == 1) != (cerr == nil) {
			t.Fatalf("k=%d: the caller's own row: %d, %v (commit: %v)", k, own, err, cerr)
		}
		jobs, err := d.JobList(ctx, driver.ListParams{Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		if ierr != nil {
			failed++
			if cerr == nil {
				committedAfterFailure++
			}
			if len(jobs) != 0 {
				t.Errorf("k=%d: JobInsertManyTx failed (%v), yet %d of its jobs were committed", k, ierr, len(jobs))
			}
			continue
		}
		if len(jobs) != 2 || len(res) != 2 {
			t.Errorf("k=%d: JobInsertManyTx succeeded with %d results, and %d jobs were committed, want 2", k, len(res), len(jobs))
		}
		for _, j := range jobs {
			evs, err := d.JobEvents(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 1 || evs[0].Type != "enqueued" {
				t.Errorf("k=%d: job %d committed with events %+v, want its enqueued event", k, j.ID, evs)
			}
		}
	}
	if failed == 0 || committedAfterFailure == 0 {
		t.Fatalf("%d calls failed, %d of them in a transaction that then committed: the test did not reach the window it is about", failed, committedAfterFailure)
	}
}

// TestJobInsertManyTxOnAnotherFile: a *sql.Tx begun on another database file
// (another Drover installation's) is refused and inserts nothing there; it
// inserted the job into that file's tables, where this driver's workers never
// see it, and answered an id that named another job.
func TestJobInsertManyTxOnAnotherFile(t *testing.T) {
	ctx := context.Background()
	d, other := openTest(t), openTest(t)
	tx, err := other.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	res, err := d.JobInsertManyTx(ctx, tx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1}})
	if err == nil {
		_ = tx.Commit()
		got, _ := other.JobGet(ctx, res[0].Job.ID)
		t.Fatalf("JobInsertManyTx in a transaction on another file: no error; the job went into its tables (%v)", got != nil)
	}
	if !errors.Is(err, driver.ErrInvalidArgument) || !strings.Contains(err.Error(), "DB()") {
		t.Errorf("JobInsertManyTx on another file: error %q, want an invalid-argument error naming DB()", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("the caller's transaction after the refusal: %v", err)
	}
}
