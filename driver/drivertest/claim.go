package drivertest

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// claimTests cover which jobs a claim takes, in which order, and that concurrent
// claimers never share a job.
var claimTests = []suiteTest{
	{"RunAtNeverEarly", testRunAt},
	{"RunAtWithDatabaseClock", testRunAtDBClock},
	{"Order", testClaimOrder},
	{"LimitTakesTheFirst", testClaimLimit},
	{"LimitAcrossPrioritiesPastFutureJobs", testClaimAcrossPriorities},
	{"ByID", testClaimByID},
	{"QueuesFilter", testClaimQueues},
	{"QueuesMergedInClaimOrder", testClaimQueuesMerged},
	{"ConcurrentClaimers", testConcurrentClaimers},
	{"BadParamsRefused", testClaimBadParams},
}

// testClaimBadParams: a claim no lease holder could honour (no owner, so the
// claimed row would break the invariant that a claimed job has one; an owner
// or request_id no driver can store) is refused with a ValidationError naming
// the field, alike on every driver, by id or by queue, and takes nothing.
// PostgreSQL claimed with an empty owner where SQLite refused; a NUL in the
// owner or request_id was a database error there, and stored by SQLite. A
// lease of 0 or less is the default lease on both (SQLite refused it).
func testClaimBadParams(h *harness) {
	j := h.mustEnqueue(nil)
	cases := []struct {
		field string
		edit  func(p *driver.ClaimParams)
	}{
		{"owner", func(p *driver.ClaimParams) { p.Owner = "" }},
		{"owner", func(p *driver.ClaimParams) { p.Owner = "w\x00x" }},
		{"request_id", func(p *driver.ClaimParams) { p.RequestID = "r\x00" }},
	}
	for _, byID := range []bool{false, true} {
		for i, c := range cases {
			p := h.claimParams(0)
			p.Start = i%2 == 0
			if byID {
				p.ID = j.ID
			}
			c.edit(&p)
			what := fmt.Sprintf("JobClaim(by id %v, owner %q, lease %s, request_id %q)", byID, p.Owner, p.LeaseDuration, p.RequestID)
			h.rejected(j.ID, driver.ErrInvalidArgument, what, func() error {
				jobs, err := h.d.JobClaim(h.ctx, p)
				if len(jobs) > 0 {
					h.t.Errorf("%s claimed %v", what, jobIDs(jobs))
				}
				return h.namingField(what, c.field, err)
			})
		}
	}
	// A lease of 0 or less is the default lease, 30 s (as a heartbeat's), on
	// every driver: SQLite refused it, PostgreSQL took it so.
	for i, lease := range []time.Duration{0, -time.Second} {
		p := h.claimParams(time.Duration(i) * time.Minute)
		p.LeaseDuration = lease
		c := h.mustClaimOne(p)
		if want := p.Now.Add(driver.DefaultLease); c.LeaseExpiresAt == nil || !c.LeaseExpiresAt.Equal(want) {
			h.t.Errorf("JobClaim with lease %s: lease_expires_at = %s, want Now+%s = %s", lease, fmtTimePtr(c.LeaseExpiresAt), driver.DefaultLease, fmtTime(want))
		}
		h.mustUnclaim(c, time.Duration(i)*time.Minute+time.Second)
	}
}

func testRunAt(h *harness) {
	runAt := h.tm(time.Hour)
	j := h.mustEnqueue(func(p *driver.InsertParams) { p.RunAt = &runAt })
	if !j.RunAt.Equal(runAt) {
		h.t.Fatalf("run_at = %s, want %s", fmtTime(j.RunAt), fmtTime(runAt))
	}
	early := h.claimParams(time.Hour - time.Millisecond)
	early.Limit = 10
	h.mustClaimNone(early)
	early.ID = j.ID
	h.mustClaimNone(early)
	ready, err := h.d.QueuesReady(h.ctx, h.at(time.Hour-time.Millisecond))
	if err != nil || slices.Contains(ready, defaultQueue) {
		h.t.Errorf("QueuesReady(run_at-1ms) = %v, %v; want no %q", ready, err, defaultQueue)
	}
	ready, err = h.d.QueuesReady(h.ctx, h.at(time.Hour))
	if err != nil || !slices.Contains(ready, defaultQueue) {
		h.t.Errorf("QueuesReady(run_at) = %v, %v; want %q", ready, err, defaultQueue)
	}
	c := h.mustClaim(time.Hour)
	if c.ID != j.ID {
		h.t.Errorf("claimed job %d, want %d", c.ID, j.ID)
	}
}

// testRunAtDBClock uses the database clock: run_at nil is now, hours ahead is not yet.
func testRunAtDBClock(h *harness) {
	later := h.tm(2 * time.Hour)
	future := h.mustEnqueue(func(p *driver.InsertParams) { p.RunAt = &later })
	now := h.mustEnqueue(func(p *driver.InsertParams) { p.RunAt = nil })
	if d := time.Until(now.RunAt); d > time.Second || d < -time.Second {
		h.t.Errorf("run_at of a job enqueued without one = %s, want within a second of now", fmtTime(now.RunAt))
	}
	p := h.claimParams(0)
	p.Now, p.Limit = nil, 10
	jobs := h.mustClaimN(p)
	if len(jobs) != 1 || jobs[0].ID != now.ID {
		h.t.Errorf("claim with the database clock = %v, want [%d] (not the future job %d)", jobIDs(jobs), now.ID, future.ID)
	}
	if len(jobs) == 1 {
		if d := jobs[0].LeaseExpiresAt.Sub(time.Now().Add(leaseDuration)); d > 2*time.Second || d < -2*time.Second {
			h.t.Errorf("lease_expires_at = %s, want about now+30s", fmtTimePtr(jobs[0].LeaseExpiresAt))
		}
	}
}

// orderSpecs are (priority, run_at offset) pairs; claim order is priority, run_at, id.
var orderSpecs = []struct {
	prio  int
	runAt time.Duration
}{
	{0, -3 * time.Minute}, {0, -2 * time.Minute}, {0, -2 * time.Minute}, {0, -time.Minute},
	{1, -10 * time.Minute}, {1, -time.Minute}, {1, -time.Minute},
	{2, -time.Hour}, {5, -5 * time.Minute}, {5, -5 * time.Minute},
}

// insertScrambled inserts orderSpecs in a shuffled order, in several batches, and
// returns the ids in the expected claim order.
func (h *harness) insertScrambled() []int64 {
	h.t.Helper()
	perm := rand.New(rand.NewSource(42)).Perm(len(orderSpecs))
	type row struct {
		id    int64
		prio  int
		runAt time.Duration
	}
	var rows []row
	for start := 0; start < len(perm); start += 3 {
		var ps []driver.InsertParams
		end := min(start+3, len(perm))
		for _, k := range perm[start:end] {
			s := orderSpecs[k]
			ps = append(ps, h.params(func(p *driver.InsertParams) {
				p.Priority, p.RunAt = s.prio, h.at(s.runAt)
				p.Args = json.RawMessage(fmt.Sprintf(`{"spec":%d}`, k))
			}))
		}
		for i, r := range h.mustInsert(ps...) {
			s := orderSpecs[perm[start+i]]
			rows = append(rows, row{r.Job.ID, s.prio, s.runAt})
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if a.prio != b.prio {
			return a.prio - b.prio
		}
		if a.runAt != b.runAt {
			return int(a.runAt - b.runAt)
		}
		return int(a.id - b.id)
	})
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	return ids
}

func testClaimOrder(h *harness) {
	want := h.insertScrambled()
	var got []int64
	for range want {
		got = append(got, h.mustClaim(0).ID)
	}
	if !slices.Equal(got, want) {
		h.t.Errorf("claim order = %v, want %v (priority, then run_at, then id)", got, want)
	}
	h.mustClaimNone(h.claimParams(0))
}

func testClaimLimit(h *harness) {
	want := h.insertScrambled()
	p := h.claimParams(0)
	p.Limit = 4
	got := jobIDs(h.mustClaimN(p))
	slices.Sort(got)
	first := slices.Clone(want[:4])
	slices.Sort(first)
	if !slices.Equal(got, first) {
		h.t.Errorf("claim with Limit 4 took %v, want the first four in claim order %v", got, first)
	}
	p.Limit = 100
	if rest := h.mustClaimN(p); len(rest) != len(want)-4 {
		h.t.Errorf("claim of the rest took %d jobs, want %d", len(rest), len(want)-4)
	}
}

// A claim's limit spans priorities in claim order, past the jobs each priority
// holds for later (before, between and after its due ones by id), and past a
// priority that holds only future jobs.
func testClaimAcrossPriorities(h *harness) {
	job := func(prio int, d time.Duration) int64 {
		return h.mustEnqueue(func(p *driver.InsertParams) {
			runAt := h.tm(d)
			p.Priority, p.RunAt = prio, &runAt
		}).ID
	}
	job(0, time.Hour)
	p0b := job(0, 2*time.Second)
	job(0, time.Hour)
	p0a := job(0, time.Second)
	job(0, 2*time.Hour)
	p1 := job(1, 0)
	job(2, time.Hour) // priority 2: nothing due
	p5a := job(5, 0)
	p5b := job(5, 0)
	p := h.claimParams(time.Minute)
	p.Limit = 4
	if got, want := jobIDs(h.mustClaimN(p)), []int64{p0a, p0b, p1, p5a}; !slices.Equal(got, want) {
		h.t.Errorf("claim of 4 took %v, want %v (priority, then run_at, then id; future jobs skipped)", got, want)
	}
	p.Limit = 10
	if got, want := jobIDs(h.mustClaimN(p)), []int64{p5b}; !slices.Equal(got, want) {
		h.t.Errorf("claim of the rest took %v, want %v", got, want)
	}
	ready, err := h.d.QueuesReady(h.ctx, h.at(time.Minute))
	if err != nil || slices.Contains(ready, defaultQueue) {
		h.t.Errorf("QueuesReady with only future jobs left = %v, %v; want no %q", ready, err, defaultQueue)
	}
}

func testClaimByID(h *harness) {
	a := h.mustEnqueue(nil)
	b := h.mustEnqueue(nil)
	later := h.tm(time.Hour)
	future := h.mustEnqueue(func(p *driver.InsertParams) { p.RunAt = &later })
	p := h.claimParams(0)
	p.ID, p.Limit = b.ID, 10
	got := h.mustClaimOne(p) // b, although a comes first in claim order
	if got.ID != b.ID {
		h.t.Fatalf("claim by id %d took job %d", b.ID, got.ID)
	}
	if s := h.get(a.ID); s.Status != lifecycle.StatusQueued {
		h.t.Errorf("claim by id %d also touched job %d: it is %s", b.ID, a.ID, s.Status)
	}
	r := h.mustStart(got, time.Second)
	p.ID = a.ID
	ca := h.mustClaimOne(p)
	for _, tc := range []struct {
		name string
		id   int64
	}{{"claimed", ca.ID}, {"running", r.ID}, {"not yet due", future.ID}, {"unknown", 987654321}} {
		q := h.claimParams(2 * time.Second)
		q.ID = tc.id
		if tc.id == 987654321 {
			h.mustClaimNone(q)
			continue
		}
		before := h.snap(tc.id)
		jobs, err := h.d.JobClaim(h.ctx, q)
		if err != nil || len(jobs) != 0 {
			h.t.Errorf("claim by id of a %s job = %v, %v; want an empty result and no error", tc.name, jobIDs(jobs), err)
		}
		h.wantUnchanged(before, "claim by id of a "+tc.name+" job")
	}
}

func testClaimQueues(h *harness) {
	ids := map[string]int64{}
	for _, q := range []string{"alpha", "beta", "gamma"} {
		ids[q] = h.mustEnqueue(func(p *driver.InsertParams) { p.Queue = q }).ID
	}
	p := h.claimParams(0)
	p.Queues, p.Limit = []string{"beta"}, 10
	if got := jobIDs(h.mustClaimN(p)); !slices.Equal(got, []int64{ids["beta"]}) {
		h.t.Errorf("claim from [beta] = %v, want [%d]", got, ids["beta"])
	}
	p.Queues = []string{"nothing-here"}
	h.mustClaimNone(p)
	p.Queues = []string{"alpha", "gamma"}
	got := jobIDs(h.mustClaimN(p))
	slices.Sort(got)
	if want := []int64{ids["alpha"], ids["gamma"]}; !slices.Equal(got, want) {
		h.t.Errorf("claim from [alpha gamma] = %v, want %v", got, want)
	}
}

// testClaimQueuesMerged: a claim naming several queues takes the first Limit
// jobs of all of them together in claim order (priority, run_at, id), returns
// them in that order, and neither a future job nor a paused queue's job takes a
// place.
func testClaimQueuesMerged(h *harness) {
	job := func(queue string, priority int, runAt time.Duration) int64 {
		return h.mustEnqueue(func(p *driver.InsertParams) {
			p.Queue, p.Priority, p.RunAt = queue, priority, h.at(runAt)
		}).ID
	}
	a1 := job("merge-a", 2, -3*time.Second)
	a2 := job("merge-a", 1, -time.Second)
	b1 := job("merge-b", 1, -2*time.Second)
	b2 := job("merge-b", 3, -5*time.Second)
	job("merge-b", 1, time.Hour) // not yet due
	job("merge-c", 0, -time.Hour)
	if err := h.d.QueuePause(h.ctx, "merge-c"); err != nil {
		h.t.Fatal(err)
	}
	p := h.claimParams(0)
	p.Queues, p.Limit = []string{"merge-a", "merge-b", "merge-c", "merge-a"}, 3
	if got, want := jobIDs(h.mustClaimN(p)), []int64{b1, a2, a1}; !slices.Equal(got, want) {
		h.t.Errorf("claim of 3 from merge-a, merge-b and paused merge-c = %v, want %v", got, want)
	}
	p.Limit = 10
	if got, want := jobIDs(h.mustClaimN(p)), []int64{b2}; !slices.Equal(got, want) {
		h.t.Errorf("claim of the rest = %v, want %v", got, want)
	}
}

func testConcurrentClaimers(h *harness) {
	const jobs, claimers = 1000, 8
	for start := 0; start < jobs; start += 250 {
		ps := make([]driver.InsertParams, 250)
		for i := range ps {
			ps[i] = h.params(func(p *driver.InsertParams) { p.RunAt, p.Args = nil, json.RawMessage(fmt.Sprintf(`{"i":%d}`, start+i)) })
		}
		h.mustInsert(ps...)
	}
	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	for w := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := fmt.Sprintf("worker-%d", w)
			for h.ctx.Err() == nil {
				got, err := h.d.JobClaim(h.ctx, driver.ClaimParams{Queues: []string{defaultQueue}, Limit: 10, Owner: who, LeaseDuration: time.Hour})
				if err != nil {
					h.t.Errorf("%s: JobClaim: %v", who, err)
					return
				}
				if len(got) == 0 {
					return
				}
				for _, j := range got {
					mu.Lock()
					if prev, dup := seen[j.ID]; dup {
						h.t.Errorf("job %d claimed by %s and again by %s", j.ID, prev, who)
					}
					seen[j.ID] = who
					mu.Unlock()
					if j.Attempt != 1 || j.Owner != who {
						h.t.Errorf("%s claimed job %d with attempt %d owner %q, want attempt 1 owner %q", who, j.ID, j.Attempt, j.Owner, who)
					}
					r, err := h.d.JobStart(h.ctx, fence(j, nil))
					if err != nil {
						h.t.Errorf("%s: JobStart(%d): %v", who, j.ID, err)
						return
					}
					if _, err := h.d.JobComplete(h.ctx, driver.CompleteParams{FenceParams: fence(r, nil), Result: json.RawMessage(`{}`)}); err != nil {
						h.t.Errorf("%s: JobComplete(%d): %v", who, j.ID, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != jobs {
		h.t.Errorf("%d distinct jobs claimed, want %d", len(seen), jobs)
	}
	all := h.listAll(driver.ListParams{Limit: 500, Ascending: true})
	if len(all) != jobs {
		h.t.Fatalf("JobList returned %d jobs, want %d", len(all), jobs)
	}
	for _, j := range all {
		if j.Status != lifecycle.StatusSucceeded || j.Attempt != 1 || j.Executions != 1 {
			h.t.Errorf("job %d ended %s attempt %d executions %d, want succeeded, 1, 1", j.ID, j.Status, j.Attempt, j.Executions)
		}
	}
	// checkAll (at cleanup) replays every history: one claim, one start, one success each.
}
