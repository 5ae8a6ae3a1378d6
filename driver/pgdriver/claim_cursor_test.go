package pgdriver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
)

// cursorFixture is a queue of jobs at priority 1, one a millisecond from t0,
// claimed at a fixed now.
type cursorFixture struct {
	t   *testing.T
	ctx context.Context
	d   *pgdriver.Driver
	t0  time.Time
	now time.Time
}

func newCursorFixture(t *testing.T, jobs int) *cursorFixture {
	f := &cursorFixture{t: t, ctx: context.Background(), d: open(t),
		t0: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	f.now = f.t0.Add(time.Hour)
	for i := 0; i < jobs; i++ {
		f.insert(fmt.Sprint("j", i), 1, f.t0.Add(time.Duration(i)*time.Millisecond))
	}
	return f
}

func (f *cursorFixture) insert(name string, priority int, runAt time.Time) {
	f.t.Helper()
	_, err := f.d.JobInsertMany(f.ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`),
		Priority: priority, RunAt: &runAt, MaxAttempts: 1, Metadata: []byte(fmt.Sprintf(`{"name":%q}`, name))}})
	if err != nil {
		f.t.Fatal(err)
	}
}

// claim claims up to limit jobs and answers their names in the order claimed.
func (f *cursorFixture) claim(limit int) []string {
	f.t.Helper()
	now := f.now
	jobs, err := f.d.JobClaim(f.ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: limit, Owner: "w", Start: true, Now: &now})
	if err != nil {
		f.t.Fatal(err)
	}
	names := make([]string, len(jobs))
	for i, j := range jobs {
		var m struct{ Name string }
		if err := json.Unmarshal(j.Metadata, &m); err != nil {
			f.t.Fatal(err)
		}
		names[i] = m.Name
	}
	return names
}

func names(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprint(prefix, i))
	}
	return out
}

func wantNames(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s claimed %v, want %v", what, got, want)
	}
}

// After a full claim of many jobs, the next claim of the queue starts past the
// last job it took, so it does not read again the index entries of the jobs
// claimed before (dead until VACUUM). A job that became ready behind that point
// waits for the first claim that scans from the start: at once when a claim
// from the cursor comes back short. Priorities before the cursor's are always
// read from their start.
func TestClaimCursorUnderBacklog(t *testing.T) {
	t.Parallel()
	f := newCursorFixture(t, 100)
	wantNames(t, "the first claim", f.claim(40), names("j", 0, 40))

	f.insert("late", 1, f.t0.Add(-time.Hour)) // first in claim order, behind the cursor
	wantNames(t, "a claim from the cursor", f.claim(40), names("j", 40, 80))
	// Past the cursor: j80..j99, 20 of 40; the rest is asked for from the
	// start, which finds late.
	wantNames(t, "a claim that drains the queue", f.claim(40), append([]string{"late"}, names("j", 80, 100)...))
	wantNames(t, "a claim of an empty queue", f.claim(40), nil)

	for i := 0; i < 100; i++ {
		f.insert(fmt.Sprint("k", i), 1, f.t0.Add(time.Minute+time.Duration(i)*time.Millisecond))
	}
	wantNames(t, "the first claim of a new backlog", f.claim(40), names("k", 0, 40))
	f.insert("urgent", 0, f.t0.Add(time.Minute)) // a priority before the cursor's
	wantNames(t, "a claim after an urgent job", f.claim(40), append([]string{"urgent"}, names("k", 40, 79)...))
}

// The cursor lasts claimCursorSpan (one second) from the claim that scanned
// from the start.
func TestClaimCursorExpires(t *testing.T) {
	t.Parallel()
	f := newCursorFixture(t, 100)
	wantNames(t, "the first claim", f.claim(40), names("j", 0, 40))
	f.insert("late", 1, f.t0.Add(-time.Hour))
	f.now = f.now.Add(999 * time.Millisecond)
	wantNames(t, "a claim 999 ms later", f.claim(32), names("j", 40, 72))
	f.now = f.now.Add(time.Millisecond)
	wantNames(t, "a claim one second later", f.claim(32), append([]string{"late"}, names("j", 72, 100)...))
}

// Claims of a few jobs keep the strict claim order: no cursor.
func TestClaimCursorNotForSmallClaims(t *testing.T) {
	t.Parallel()
	f := newCursorFixture(t, 100)
	wantNames(t, "a claim of 31", f.claim(31), names("j", 0, 31))
	f.insert("late", 1, f.t0.Add(-time.Hour))
	wantNames(t, "the next claim", f.claim(31), append([]string{"late"}, names("j", 31, 61)...))
}
