package sqlitedriver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// TestChunksCoverEveryRowInOrder: a batch runs as chunks of the fixed sizes,
// largest first, and every row goes to exactly one chunk, in order.
func TestChunksCoverEveryRowInOrder(t *testing.T) {
	s := batchStmt{name: "JobInsertMany", cols: 15, scalars: []any{"at"}}
	const rows = 256 + 64 + 16 + 4 + 4 + 1 // every size, one twice
	vals := make([]any, 0, rows*s.cols)
	for i := range rows * s.cols {
		vals = append(vals, i)
	}
	var sizes []int
	var got []any
	err := s.chunks(vals, func(q string, args []any) error {
		if want := s.text((len(args) - 1) / s.cols); q != want {
			t.Errorf("chunk of %d rows ran %.60q…, want its cached statement", (len(args)-1)/s.cols, q)
		}
		if args[0] != "at" {
			t.Errorf("chunk of %d rows starts with %v, want the scalar", len(args)/s.cols, args[0])
		}
		args = args[1:]
		sizes = append(sizes, len(args)/s.cols)
		got = append(got, args...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{256, 64, 16, 4, 4, 1}; !reflect.DeepEqual(sizes, want) {
		t.Errorf("chunk sizes %v, want %v", sizes, want)
	}
	if !reflect.DeepEqual(got, vals) {
		t.Error("the chunks' arguments are not the batch's values in order")
	}
	if err := s.chunks(vals[:10], func(string, []any) error { return nil }); err == nil {
		t.Error("10 values accepted as rows of 15")
	}
}

// TestBatchesAcrossChunks: insert, claim and complete batches that span every
// chunk size keep their per-job results: ids ascend in input order, a repeated
// idempotency key in a later chunk finds the job of an earlier one, each job
// gets its own token and result, and every history is whole.
func TestBatchesAcrossChunks(t *testing.T) {
	f := newFixture(t)
	const n = 341 // 256 + 64 + 16 + 4 + 1
	ps := make([]driver.InsertParams, n)
	for i := range ps {
		ps[i] = params("default")
		ps[i].Args = json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))
		ps[i].RunAt = f.at(-time.Second)
	}
	ps[3].IdempotencyKey = "early"
	ps[300].IdempotencyKey = "early" // in the 64-row chunk: the job of row 3
	res, err := f.d.JobInsertMany(f.ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	var prev int64
	for i, r := range res {
		if i == 300 {
			if !r.Existing || r.Job.ID != res[3].Job.ID {
				t.Errorf("row 300 = %+v, want the existing job %d", r, res[3].Job.ID)
			}
			continue
		}
		if r.Existing || string(r.Job.Args) != string(ps[i].Args) || r.Job.ID <= prev {
			t.Fatalf("row %d = existing %v, args %s, id %d after %d; want new, args %s, ascending", i, r.Existing, r.Job.Args, r.Job.ID, prev, ps[i].Args)
		}
		prev = r.Job.ID
	}

	jobs := f.claim(driver.ClaimParams{Limit: n, Start: true})
	if len(jobs) != n-1 {
		t.Fatalf("claimed %d jobs, want %d", len(jobs), n-1)
	}
	tokens := map[string]bool{}
	cs := make([]driver.CompleteParams, len(jobs))
	for i, j := range jobs {
		if j.Status != lifecycle.StatusRunning || j.Rev != 3 || (i > 0 && j.ID <= jobs[i-1].ID) {
			t.Fatalf("claimed job %d = %+v, want running at rev 3, in id order", i, j)
		}
		tokens[j.LeaseToken] = true
		cs[i] = driver.CompleteParams{FenceParams: fp(j, f.at(time.Second)), Result: json.RawMessage(fmt.Sprintf(`{"done": %d}`, j.ID))}
		cs[i].RequestID = fmt.Sprintf("req-%d", i)
	}
	if len(tokens) != len(jobs) {
		t.Errorf("%d distinct lease tokens for %d jobs", len(tokens), len(jobs))
	}
	for i, o := range f.d.JobCompleteMany(f.ctx, cs) {
		if o.Err != nil || o.Job.ID != jobs[i].ID || o.Job.Status != lifecycle.StatusSucceeded || string(o.Job.Result) != string(cs[i].Result) {
			t.Fatalf("completion %d = %+v, want job %d succeeded with %s", i, o, jobs[i].ID, cs[i].Result)
		}
		f.wantHistory(o.Job.ID, "enqueued", "claimed", "started", "succeeded")
	}
}

func TestPlaceholdersSkipCommentsAndStrings(t *testing.T) {
	q := "-- why? because\nSELECT ?, '?', \"a?\", ? -- and?\nFROM t WHERE x = ?"
	if got := placeholders(q); got != 3 {
		t.Errorf("placeholders(%q) = %d, want 3", q, got)
	}
}

// An attempt's error time is kept to the microsecond, as on PostgreSQL and as
// every other time here is; it carried nanoseconds (helper-33).
func TestErrorEntryTimeInMicroseconds(t *testing.T) {
	at := time.Date(2026, 11, 25, 4, 0, 0, 123456789, time.UTC)
	e, err := errorEntry(1, at, "boom", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e, `"2026-11-25T04:00:00.123456Z"`) {
		t.Errorf("errorEntry = %s, want the time to the microsecond", e)
	}
}
