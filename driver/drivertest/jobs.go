package drivertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// jobTests cover inserting, reading, listing and deleting jobs.
var jobTests = []suiteTest{
	{"InsertManyRoundTrip", testInsertRoundTrip},
	{"InsertManyEmpty", testInsertEmpty},
	{"ListFilters", testListFilters},
	{"ListPagination", testListPagination},
	{"ListMaxBytes", testListMaxBytes},
	{"DeleteFinished", testDeleteFinished},
	{"DeleteFinishedBatchInParts", testDeleteFinishedBatch},
	{"DeleteFinishedPastPurgedJobs", testDeleteFinishedPastPurged},
	{"FailureTextIsBounded", testFailureTextBounded},
	{"NumbersComeBackWithinTheirCountedSize", testNumbersCounted},
}

// testNumbersCounted: a number in args or a result comes back equal, no
// longer than the size CheckJSONSize counted for it, and passing CheckJSON
// again. PostgreSQL writes jsonb numbers without an exponent: 1e1000 passed
// the check as given, came back as 1,001 digits that failed it, so a job
// that returned its args failed on PostgreSQL and succeeded on SQLite.
func testNumbersCounted(h *harness) {
	nums := []string{"1e1000", "-1e999", "1e-999", "1e999", "1e-998", "-1.5e-997", "1.7976931348623157e308", "5e-324", "123.4500e1",
		"1.50e1", "25e-3", "0.005e2", "-0e5", "0.00e1", "-0.0", "0", "-12.5", "1E+3", "9" + strings.Repeat("0", 999)}
	rng := rand.New(rand.NewPCG(4, 1))
	for range 200 {
		n := strconv.FormatUint(rng.Uint64N(1e15), 10)
		if cut := rng.IntN(len(n)); cut > 0 {
			n = n[:cut] + "." + n[cut:]
		}
		if rng.IntN(2) == 0 {
			n = "-" + n
		}
		nums = append(nums, fmt.Sprintf("%se%d", n, rng.IntN(2000)-1000))
	}
	var given []string // the numbers CheckJSON accepts
	for _, n := range nums {
		if driver.CheckJSON("args", json.RawMessage(n)) == nil {
			given = append(given, n)
		}
	}
	if len(given) < len(nums)/2 {
		h.t.Fatalf("only %d of %d numbers pass CheckJSON", len(given), len(nums))
	}
	args := json.RawMessage(`{"n":[` + strings.Join(given, ",") + `]}`)
	j := h.mustEnqueue(func(p *driver.InsertParams) { p.Args = args })
	c := h.mustStart(h.mustClaim(0), 0)
	if _, err := h.d.JobComplete(h.ctx, driver.CompleteParams{FenceParams: fence(c, h.at(0)), Result: args}); err != nil {
		h.t.Fatalf("JobComplete with the numbers as its result: %v", err)
	}
	for what, raw := range map[string]json.RawMessage{"args": h.get(j.ID).Args, "result": h.get(j.ID).Result} {
		if err := driver.CheckJSON(what, raw); err != nil {
			h.t.Errorf("%s as stored fails CheckJSON: %v", what, err)
		}
		var back struct{ N []json.Number }
		if err := json.Unmarshal(raw, &back); err != nil || len(back.N) != len(given) {
			h.t.Fatalf("%s: %d numbers back (%v), want %d", what, len(back.N), err, len(given))
		}
		for i, n := range back.N {
			counted, _ := driver.CheckJSONSize(what, json.RawMessage(given[i]))
			a, _ := new(big.Rat).SetString(given[i])
			b, ok := new(big.Rat).SetString(string(n))
			switch {
			case !ok || a.Cmp(b) != 0:
				h.t.Errorf("%s: %s came back as %.60s, another value", what, given[i], n)
			case strings.ContainsAny(string(n), "eE"):
				// Written out in full, as PostgreSQL's jsonb keeps it, so a
				// handler decodes 1e2 into an int on every driver.
				h.t.Errorf("%s: %.60s came back as %.60s, with its exponent", what, given[i], n)
			case len(n) > counted:
				h.t.Errorf("%s: %s came back as %d characters, more than the %d counted", what, given[i], len(n), counted)
			}
		}
	}
}

// testFailureTextBounded: a failure keeps at most driver.MaxErrorTextBytes of
// its error and of its stack, each cut at a character and saying so. A job
// keeps every attempt's, and a worker that reported megabytes made each
// retry rewrite them all (helper-47: 2 MB an attempt, 50 MB a job).
func testFailureTextBounded(h *harness) {
	r := h.runningJob(nil)
	huge := strings.Repeat("é", driver.MaxErrorTextBytes) // twice the bound, in two-byte runes
	fp := failParams(h.at(2*time.Second), huge, h.tm(time.Hour), false)
	fp.FenceParams, fp.Stack = fence(r, h.at(2*time.Second)), huge
	j, err := h.d.JobFail(h.ctx, fp)
	if err != nil {
		h.t.Fatalf("JobFail with a %d-byte error and stack: %v", len(huge), err)
	}
	if len(j.Errors) != 1 {
		h.t.Fatalf("job %d has %d errors after one failure, want 1", j.ID, len(j.Errors))
	}
	for what, text := range map[string]string{"error": j.Errors[0].Error, "stack": j.Errors[0].Stack} {
		if len(text) > driver.MaxErrorTextBytes+64 || !utf8.ValidString(text) || !strings.HasPrefix(text, "éé") || !strings.Contains(text, "bytes cut") {
			h.t.Errorf("job %d: a %d-byte %s was kept as %d bytes (valid UTF-8 %v, ends %q); want at most about %d, cut at a character, saying so",
				j.ID, len(huge), what, len(text), utf8.ValidString(text), text[max(0, len(text)-30):], driver.MaxErrorTextBytes)
		}
	}
}

func testInsertRoundTrip(h *harness) {
	later := h.tm(3 * time.Hour)
	ps := []driver.InsertParams{
		h.params(func(p *driver.InsertParams) {
			p.Kind, p.RunAt = "kind.zero", nil
			p.Args = json.RawMessage(`{"z":1,"a":{"nested":[1,2.5,"x",null,true]},"unicode":"héllo ✓ \u00e9","big":1e3}`)
		}),
		h.params(func(p *driver.InsertParams) {
			p.Kind, p.Queue, p.Priority, p.MaxAttempts, p.Timeout = "kind.one", "q-1:x.y_z", 7, 9, 1500*time.Millisecond
			p.RunAt, p.IdempotencyKey = &later, "key-1"
			p.Args = json.RawMessage(` { "spaced" : [ ] } `)
			p.Metadata = json.RawMessage(`{"trace":"abc","n":2}`)
		}),
		h.params(func(p *driver.InsertParams) { p.Kind, p.Args = "kind.two", nil }),
	}
	inputs := slices.Clone(ps)
	res := h.mustInsert(ps...)
	now := time.Now()
	for i, r := range res {
		in, j := inputs[i], r.Job
		if err := driver.ValidateInsert(&in, driver.Limits{}); err != nil {
			h.t.Fatal(err)
		}
		what := fmt.Sprintf("result %d (%s)", i, in.Kind)
		if r.Existing {
			h.t.Errorf("%s: Existing = true for a new job", what)
		}
		if j.Kind != in.Kind || j.Queue != in.Queue || j.Priority != in.Priority || j.MaxAttempts != in.MaxAttempts ||
			j.Timeout != in.Timeout || j.IdempotencyKey != in.IdempotencyKey || j.Status != lifecycle.StatusQueued {
			h.t.Errorf("%s: got kind %q queue %q priority %d max_attempts %d timeout %s key %q status %s; want %q %q %d %d %s %q queued",
				what, j.Kind, j.Queue, j.Priority, j.MaxAttempts, j.Timeout, j.IdempotencyKey, j.Status,
				in.Kind, in.Queue, in.Priority, in.MaxAttempts, in.Timeout, in.IdempotencyKey)
		}
		if !jsonEqual(j.Args, in.Args) {
			h.t.Errorf("%s: args = %s, want JSON equal to %s", what, j.Args, in.Args)
		}
		if len(in.Metadata) > 0 && !jsonEqual(j.Metadata, in.Metadata) {
			h.t.Errorf("%s: metadata = %s, want JSON equal to %s", what, j.Metadata, in.Metadata)
		}
		if d := now.Sub(j.CreatedAt); d > time.Second || d < -time.Second {
			h.t.Errorf("%s: created_at = %s, want within a second of now (%s)", what, fmtTime(j.CreatedAt), fmtTime(now))
		}
		switch {
		case in.RunAt == nil:
			if d := now.Sub(j.RunAt); d > time.Second || d < -time.Second {
				h.t.Errorf("%s: run_at = %s, want now when not given", what, fmtTime(j.RunAt))
			}
		case !j.RunAt.Equal(*in.RunAt):
			h.t.Errorf("%s: run_at = %s, want %s", what, fmtTime(j.RunAt), fmtTime(*in.RunAt))
		}
		if d := diffJobs(j, h.get(j.ID)); d != "" {
			h.t.Errorf("%s: JobGet differs from the insert result: %s", what, d)
		}
		if i > 0 && j.ID <= res[i-1].Job.ID {
			h.t.Errorf("%s: id %d not above the previous result's %d; want results in input order", what, j.ID, res[i-1].Job.ID)
		}
	}
}

func testInsertEmpty(h *harness) {
	res, err := h.d.JobInsertMany(h.ctx, nil)
	if err != nil || len(res) != 0 {
		h.t.Errorf("JobInsertMany(nil) = %v, %v; want no results and no error", res, err)
	}
}

func testListFilters(h *harness) {
	mk := func(q, k string) func(p *driver.InsertParams) {
		return func(p *driver.InsertParams) { p.Queue, p.Kind = q, k }
	}
	a1 := h.mustEnqueue(mk("a", "k1"))
	a2 := h.claimedJob(mk("a", "k2"))
	b1 := h.runningJob(mk("b", "k1"))
	b2 := h.mustEnqueue(mk("b", "k2"))
	h.mustCancel(b2.ID, time.Second)
	ids := func(js []*driver.Job) []int64 { return jobIDs(js) }
	tests := []struct {
		name string
		p    driver.ListParams
		want []int64 // descending id order
	}{
		{"all", driver.ListParams{}, []int64{b2.ID, b1.ID, a2.ID, a1.ID}},
		{"all ascending", driver.ListParams{Ascending: true}, []int64{a1.ID, a2.ID, b1.ID, b2.ID}},
		{"queue a", driver.ListParams{Queue: "a"}, []int64{a2.ID, a1.ID}},
		{"kind k1", driver.ListParams{Kind: "k1"}, []int64{b1.ID, a1.ID}},
		{"queued", driver.ListParams{Statuses: []lifecycle.Status{lifecycle.StatusQueued}}, []int64{a1.ID}},
		{"claimed or running", driver.ListParams{Statuses: []lifecycle.Status{lifecycle.StatusClaimed, lifecycle.StatusRunning}}, []int64{b1.ID, a2.ID}},
		{"queue b kind k2 canceled", driver.ListParams{Queue: "b", Kind: "k2", Statuses: []lifecycle.Status{lifecycle.StatusCanceled}}, []int64{b2.ID}},
		{"queue b kind k2 queued", driver.ListParams{Queue: "b", Kind: "k2", Statuses: []lifecycle.Status{lifecycle.StatusQueued}}, nil},
		{"unknown queue", driver.ListParams{Queue: "zzz"}, nil},
		{"limit 2", driver.ListParams{Limit: 2}, []int64{b2.ID, b1.ID}},
		{"after b1", driver.ListParams{AfterID: b1.ID}, []int64{a2.ID, a1.ID}},
		{"after a2 ascending", driver.ListParams{AfterID: a2.ID, Ascending: true}, []int64{b1.ID, b2.ID}},
	}
	for _, tt := range tests {
		got, err := h.d.JobList(h.ctx, tt.p)
		if err != nil {
			h.t.Errorf("JobList %s: %v", tt.name, err)
			continue
		}
		if !slices.Equal(ids(got), tt.want) {
			h.t.Errorf("JobList %s = %v, want %v", tt.name, ids(got), tt.want)
		}
	}
}

// testListMaxBytes: with MaxBytes a listing ends after the first job that
// takes the jobs read over it, from the second on (driver.ListFull), and a
// caller paging with PageFit, as the HTTP API does, sees every job once, in
// order, each page within its bounds.
func testListMaxBytes(h *harness) {
	sizes := []int{1000, 1000, 1000, 5000, 10, 10, 10, 3000, 10, 10}
	ps := make([]driver.InsertParams, len(sizes))
	for i, n := range sizes {
		ps[i] = h.params(func(p *driver.InsertParams) {
			p.Kind = "list-max-bytes"
			p.Args = json.RawMessage(`{"s":"` + strings.Repeat("x", n) + `"}`)
		})
	}
	h.mustInsert(ps...)
	for _, asc := range []bool{true, false} {
		all, err := h.d.JobList(h.ctx, driver.ListParams{Kind: "list-max-bytes", Ascending: asc})
		if err != nil || len(all) != len(sizes) {
			h.t.Fatalf("JobList ascending %v: %d jobs, %v; want %d", asc, len(all), err, len(sizes))
		}
		// want is the rule over the full listing's own weights: the drivers
		// give args back in their own spelling.
		want := func(limit, maxBytes int) []int64 {
			bytes := 0
			for i, j := range all {
				bytes += driver.JobBytes(j)
				if i+1 == limit || (i >= 1 && bytes > maxBytes) {
					return jobIDs(all[:i+1])
				}
			}
			return jobIDs(all)
		}
		for _, maxBytes := range []int{1, 999, 1500, 2500, 3500, 9000, 1 << 20} {
			for _, limit := range []int{0, 3, 100} {
				p := driver.ListParams{Kind: "list-max-bytes", Ascending: asc, Limit: limit, MaxBytes: maxBytes}
				got, err := h.d.JobList(h.ctx, p)
				if err != nil {
					h.t.Fatalf("JobList(%+v): %v", p, err)
				}
				if w := want(limit, maxBytes); !slices.Equal(jobIDs(got), w) {
					h.t.Errorf("JobList(limit %d, max_bytes %d, ascending %v) = %v, want %v (ends after the job that goes over)",
						limit, maxBytes, asc, jobIDs(got), w)
				}
			}
		}
		// Paging as the HTTP API does: Limit+1 jobs asked, PageFit kept.
		for _, maxBytes := range []int{1, 2500, 4000} {
			var got []int64
			p := driver.ListParams{Kind: "list-max-bytes", Ascending: asc, Limit: 4, MaxBytes: maxBytes}
			for page := 0; ; page++ {
				if page > len(sizes) {
					h.t.Fatalf("paging by max_bytes %d (ascending %v) does not end", maxBytes, asc)
				}
				js, err := h.d.JobList(h.ctx, p)
				if err != nil {
					h.t.Fatalf("JobList(%+v): %v", p, err)
				}
				n := driver.PageFit(js, p.Limit-1, maxBytes)
				if n == 0 && len(js) > 0 {
					h.t.Fatalf("PageFit kept none of %d jobs", len(js))
				}
				weight := 0
				for _, j := range js[:n] {
					weight += driver.JobBytes(j)
				}
				if n > 1 && weight > maxBytes {
					h.t.Errorf("a page of %d jobs weighs %d bytes, over max_bytes %d", n, weight, maxBytes)
				}
				got = append(got, jobIDs(js[:n])...)
				if n == len(js) {
					break // the last page
				}
				p.AfterID = js[n-1].ID
			}
			if w := jobIDs(all); !slices.Equal(got, w) {
				h.t.Errorf("pages by max_bytes %d (ascending %v) = %v, want every job once: %v", maxBytes, asc, got, w)
			}
		}
	}
	// The connection a listing cut short gave up is no loss: the next ones answer.
	for range 3 {
		js, err := h.d.JobList(h.ctx, driver.ListParams{Kind: "list-max-bytes", MaxBytes: 1})
		if err != nil || len(js) != 2 {
			h.t.Fatalf("JobList after a cut listing: %d jobs, %v; want 2", len(js), err)
		}
	}
	if js, err := h.d.JobList(h.ctx, driver.ListParams{Kind: "list-max-bytes"}); err != nil || len(js) != len(sizes) {
		h.t.Errorf("JobList after cut listings: %d jobs, %v; want %d", len(js), err, len(sizes))
	}
}

func testListPagination(h *harness) {
	const n = 23
	ps := make([]driver.InsertParams, n)
	for i := range ps {
		ps[i] = h.params(func(p *driver.InsertParams) { p.Args = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)) })
	}
	var want []int64
	for _, r := range h.mustInsert(ps...) {
		want = append(want, r.Job.ID)
	}
	for _, asc := range []bool{true, false} {
		var got []int64
		p := driver.ListParams{Limit: 5, Ascending: asc}
		for page := 0; ; page++ {
			if page > n {
				h.t.Fatalf("pagination (ascending %v) does not end", asc)
			}
			js, err := h.d.JobList(h.ctx, p)
			if err != nil {
				h.t.Fatalf("JobList(%+v): %v", p, err)
			}
			if len(js) > 5 {
				h.t.Errorf("JobList page of %d jobs, want at most Limit 5", len(js))
			}
			if len(js) == 0 {
				break
			}
			got = append(got, jobIDs(js)...)
			p.AfterID = js[len(js)-1].ID
		}
		w := slices.Clone(want)
		if !asc {
			slices.Reverse(w)
		}
		if !slices.Equal(got, w) {
			h.t.Errorf("pages (ascending %v) = %v, want every job once: %v", asc, got, w)
		}
	}
	if def, err := h.d.JobList(h.ctx, driver.ListParams{}); err != nil || len(def) != n {
		h.t.Errorf("JobList default limit: %d jobs, %v; want all %d (default 100)", len(def), err, n)
	}
}

func testDeleteFinished(h *harness) {
	old := -3 * time.Hour
	atOld := func(p *driver.InsertParams) { p.RunAt = h.at(old) }
	// Finished two hours ago: succeeded, failed, canceled.
	claimOld := func() *driver.Job {
		j := h.mustEnqueue(atOld)
		return h.mustClaimOne(driver.ClaimParams{Queues: []string{defaultQueue}, ID: j.ID, Limit: 1, Owner: owner,
			LeaseDuration: leaseDuration, Now: h.at(-2 * time.Hour)})
	}
	s := h.mustStart(claimOld(), -2*time.Hour+time.Second)
	h.mustComplete(s, -2*time.Hour+2*time.Second, nil)
	f := h.mustStart(claimOld(), -2*time.Hour+time.Second)
	h.mustFail(f, failParams(h.at(-2*time.Hour+2*time.Second), "boom", h.tm(time.Hour), true), lifecycle.StatusFailed)
	x := h.mustEnqueue(atOld)
	h.mustCancel(x.ID, -2*time.Hour)
	// Finished just now, or not finished at all.
	recent := h.runningJob(nil)
	h.mustComplete(recent, 2*time.Second, nil)
	keep := []*driver.Job{recent, h.mustEnqueue(atOld), h.mustStart(claimOld(), -2*time.Hour+time.Second)}
	var snaps []snapshot
	for _, k := range keep {
		snaps = append(snaps, h.snap(k.ID))
	}
	// No cutoff at all would be every finished job: refused.
	for _, p := range []driver.DeleteFinishedParams{{Limit: 100}, {OlderThan: -time.Hour, Limit: 100}} {
		if n, err := h.d.JobDeleteFinished(h.ctx, p); !errors.Is(err, driver.ErrInvalidArgument) || n != 0 {
			h.t.Errorf("JobDeleteFinished(%+v) = %d, %v; want ErrInvalidArgument", p, n, err)
		}
	}
	// By age, on the database's clock (t0 is about now): none is three hours old.
	if n, err := h.d.JobDeleteFinished(h.ctx, driver.DeleteFinishedParams{OlderThan: 3 * time.Hour, Limit: 100}); err != nil || n != 0 {
		h.t.Errorf("JobDeleteFinished(older than 3h) = %d, %v; want 0", n, err)
	}
	n, err := h.d.JobDeleteFinished(h.ctx, driver.DeleteFinishedParams{OlderThan: time.Hour, Limit: 2})
	if err != nil || n != 2 {
		h.t.Errorf("JobDeleteFinished(older than 1h, limit 2) = %d, %v; want 2", n, err)
	}
	before := h.tm(-time.Hour)
	n, err = h.d.JobDeleteFinished(h.ctx, driver.DeleteFinishedParams{Before: before, Limit: 100})
	if err != nil || n != 1 {
		h.t.Errorf("JobDeleteFinished(the rest) = %d, %v; want 1", n, err)
	}
	for _, id := range []int64{s.ID, f.ID, x.ID} {
		h.wantGone(id)
	}
	for _, sn := range snaps {
		h.wantUnchanged(sn, "JobDeleteFinished")
	}
	if n, err := h.d.JobDeleteFinished(h.ctx, driver.DeleteFinishedParams{Before: before, Limit: 100}); err != nil || n != 0 {
		h.t.Errorf("JobDeleteFinished with nothing to delete = %d, %v; want 0", n, err)
	}
}

// Jobs completed by one batch are deleted across calls when the limit is
// smaller than the batch, each exactly once.
func testDeleteFinishedBatch(h *harness) {
	jobs := h.runningBatch(5)
	ps := make([]driver.CompleteParams, len(jobs))
	for i, j := range jobs {
		ps[i] = driver.CompleteParams{FenceParams: fence(j, h.at(time.Second))}
	}
	for i, o := range h.d.JobCompleteMany(h.ctx, ps) {
		if o.Err != nil {
			h.t.Fatalf("JobCompleteMany: job %d: %v", jobs[i].ID, o.Err)
		}
	}
	before := h.tm(time.Hour)
	var got []int
	for range 4 {
		n, err := h.d.JobDeleteFinished(h.ctx, driver.DeleteFinishedParams{Before: before, Limit: 2})
		if err != nil {
			h.t.Fatalf("JobDeleteFinished: %v", err)
		}
		got = append(got, n)
	}
	if !slices.Equal(got, []int{2, 2, 1, 0}) {
		h.t.Errorf("JobDeleteFinished(limit 2) four times = %v, want [2 2 1 0]", got)
	}
	for _, j := range jobs {
		h.wantGone(j.ID)
	}
}

// testDeleteFinishedPastPurged: jobs a DLQ purge deleted before retention
// reached them do not count against retention's limit, nor end its call short
// of it while older finished jobs are left: the engine takes an answer below
// the limit for the end of retention's work until its next pass.
func testDeleteFinishedPastPurged(h *harness) {
	for range 3 {
		h.failedJob(nil) // finished at t0+2s
	}
	if n, err := h.d.JobDLQPurge(h.ctx, driver.DLQPurgeParams{}); err != nil || n != 3 {
		h.t.Fatalf("JobDLQPurge = %d, %v; want 3", n, err)
	}
	var done []*driver.Job
	for range 2 {
		done = append(done, h.mustComplete(h.runningJob(nil), 3*time.Second, nil))
	}
	n, err := h.d.JobDeleteFinished(h.ctx, driver.DeleteFinishedParams{Before: h.tm(time.Hour), Limit: 2})
	if err != nil || n != 2 {
		h.t.Errorf("JobDeleteFinished(limit 2) after a purge of 3 failed jobs that finished first = %d, %v; want 2 (the succeeded jobs %d and %d)",
			n, err, done[0].ID, done[1].ID)
	}
	for _, j := range done {
		h.wantGone(j.ID)
	}
}
