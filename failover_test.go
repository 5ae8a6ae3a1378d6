package drover_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

const failoverTTL = time.Second

// TestLeaderFailover runs three engine subprocesses on one database, SIGKILLs the
// leader twice, and proves that each time exactly one survivor takes over within
// a bounded time, that LeaderGet names it, that no two processes ever led at
// once, and that the last leader's lease reaper requeues an abandoned job.
func TestLeaderFailover(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testLeaderFailover(t, kind)
		})
	}
}

// leadership is one process's claim to lead, from its OnLeader calls (timestamps
// are the helper's wall clock, which it shares with the parent).
type leadership struct {
	proc       string
	start, end time.Time // end zero: still leading
}

func testLeaderFailover(t *testing.T, kind string) {
	ctx := context.Background()
	url := testdb.URL(t, kind)
	drv := testdb.OpenURL(t, kind, url)
	client, err := drover.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}

	out := newOutputLog()
	procs := map[string]*helperProc{}
	for _, n := range []string{"a", "b", "c"} {
		name := "engine-" + kind + "-" + n
		procs[name] = startHelper(t, out, name, "engine", envHelperURL+"="+url, envHelperTTL+"="+failoverTTL.String())
	}

	// Every OnLeader line, as intervals per process; checked for overlap at the end.
	var terms []*leadership
	open := map[string]*leadership{}
	leaders := func() []string {
		var ids []string
		for id := range open {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids
	}
	reapedBy := map[int64][]string{} // job id → engines that logged reaping it
	cursor := 0
	// next consumes output until a process reports becoming leader and returns it.
	next := func(what string, timeout time.Duration) *leadership {
		t.Helper()
		var got *leadership
		out.await(t, &cursor, timeout, what, func(pl procLine) bool {
			if strings.Contains(pl.Text, `msg="lease expired; job reaped"`) {
				id, _ := strconv.ParseInt(scanKV(pl.Text, "job"), 10, 64)
				reapedBy[id] = append(reapedBy[id], pl.Proc)
				return false
			}
			f := fields(pl.Text)
			if len(f) != 4 || f[0] != "leader" {
				return false
			}
			if f[2] != pl.Proc {
				t.Errorf("helper %s reported leadership for %q", pl.Proc, f[2])
			}
			ns, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil {
				t.Fatalf("bad leader line %q from %s", pl.Text, pl.Proc)
			}
			at := time.Unix(0, ns)
			if f[1] == "false" {
				if l := open[pl.Proc]; l != nil {
					l.end = at
					delete(open, pl.Proc)
				}
				return false
			}
			if open[pl.Proc] != nil {
				t.Errorf("%s reported becoming leader twice without losing it", pl.Proc)
			}
			l := &leadership{proc: pl.Proc, start: at}
			terms = append(terms, l)
			open[pl.Proc] = l
			if len(open) > 1 {
				t.Errorf("%s became leader while others still lead: leaders now %v", pl.Proc, leaders())
			}
			got = l
			return true
		})
		return got
	}

	current := next("a first leader", 30*time.Second)
	for round := 1; round <= 2; round++ {
		// Before the kill: the database agrees, and the leader keeps extending its
		// lease while the others campaign (and lose) every TTL/3.
		var first, held time.Time // held: the latest expiry of the leader's lease seen
		extensions := 0
		eventually(t, 10*failoverTTL, fmt.Sprintf("round %d: %s extends its lease twice", round, current.proc), func() (bool, string) {
			l, err := drv.LeaderGet(ctx)
			if err != nil {
				return false, err.Error()
			}
			if l.ID != current.proc {
				t.Fatalf("round %d: LeaderGet = %q, but %s reported leading (leaders by output: %v)", round, l.ID, current.proc, leaders())
			}
			if !first.IsZero() && l.ExpiresAt.After(first) {
				extensions++
				first = l.ExpiresAt
			}
			if first.IsZero() {
				first = l.ExpiresAt
			}
			held = l.ExpiresAt
			return extensions >= 2, fmt.Sprintf("%d extensions, expires %s", extensions, l.ExpiresAt)
		})

		killedAt := procs[current.proc].kill(t)
		procs[current.proc].requireKilled(t)
		open[current.proc].end = killedAt
		delete(open, current.proc)
		if len(open) != 0 {
			t.Fatalf("round %d: after killing %s, others still claim to lead: %v", round, current.proc, leaders())
		}

		successor := next(fmt.Sprintf("round %d: a successor to %s", round, current.proc), 10*time.Second+3*failoverTTL)
		took := successor.start.Sub(killedAt)
		t.Logf("round %d: %s killed; %s led %s later (TTL %s)", round, current.proc, successor.proc, took.Round(time.Millisecond), failoverTTL)
		if took > 3*failoverTTL {
			t.Errorf("round %d: %s took over %s after %s was killed, want at most 3×TTL = %s",
				round, successor.proc, took.Round(time.Millisecond), current.proc, 3*failoverTTL)
		}
		if took < 0 {
			t.Errorf("round %d: %s became leader %s before %s was killed", round, successor.proc, -took, current.proc)
		}
		// The dead leader's lease is its own until it runs out: an election
		// before that would have overlapped a leader that was merely slow.
		if successor.start.Before(held) {
			t.Errorf("round %d: %s became leader at %s, before the lease of %s (seen expiring at %s) ran out",
				round, successor.proc, stamp(successor.start), current.proc, stamp(held))
		}
		l, err := drv.LeaderGet(ctx)
		if err != nil || l.ID != successor.proc {
			t.Fatalf("round %d: LeaderGet = %q (err %v), want the successor %s", round, l.ID, err, successor.proc)
		}
		current = successor
	}

	// The last leader's reaper requeues a job whose lease ran out: claim and
	// start it here with a short lease, and then do nothing.
	res, err := client.Enqueue(ctx, "abandoned", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	claimed, err := drv.JobClaim(ctx, driver.ClaimParams{ID: id, Limit: 1, Owner: "failover-parent", LeaseDuration: 200 * time.Millisecond})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim job %d: %d jobs, err %v", id, len(claimed), err)
	}
	fence := driver.FenceParams{ID: id, Attempt: claimed[0].Attempt, LeaseToken: claimed[0].LeaseToken}
	if _, err := drv.JobStart(ctx, fence); err != nil {
		t.Fatalf("start job %d: %v", id, err)
	}
	out.await(t, &cursor, 10*time.Second+3*failoverTTL, fmt.Sprintf("job %d reaped", id), func(pl procLine) bool {
		if !strings.Contains(pl.Text, `msg="lease expired; job reaped"`) {
			return false
		}
		j, _ := strconv.ParseInt(scanKV(pl.Text, "job"), 10, 64)
		reapedBy[j] = append(reapedBy[j], pl.Proc)
		return j == id
	})
	if got := reapedBy[id]; len(got) != 1 || got[0] != current.proc {
		t.Errorf("job %d reaped by %v, want only by the leader %s", id, got, current.proc)
	}
	j, err := drv.JobGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != lifecycle.StatusQueued || j.Attempt != 1 || j.Owner != "" || len(j.Errors) != 1 {
		t.Errorf("reaped job %d: status %s attempt %d owner %q errors %d, want queued, attempt 1, no owner, 1 error",
			id, j.Status, j.Attempt, j.Owner, len(j.Errors))
	}
	if err := lifecycle.CheckInvariants(j.State()); err != nil {
		t.Errorf("reaped job %d: %v", id, err)
	}
	events, err := drv.JobEvents(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := lifecycle.CheckHistory(events); err != nil {
		t.Errorf("reaped job %d history: %v", id, err)
	}
	if err := checkEventTypes(events, "enqueued", "claimed", "started", "stalled", "requeued"); err != nil {
		t.Errorf("reaped job %d: %v\n%s", id, err, eventsString(events))
	}
	if _, err := drv.JobComplete(ctx, driver.CompleteParams{FenceParams: fence}); !errors.Is(err, driver.ErrLeaseLost) {
		t.Errorf("completing reaped job %d with its old fence: err = %v, want ErrLeaseLost", id, err)
	}

	// No two processes ever claimed to lead at the same time.
	now := time.Now()
	for i, a := range terms {
		for _, b := range terms[i+1:] {
			aEnd, bEnd := a.end, b.end
			if aEnd.IsZero() {
				aEnd = now
			}
			if bEnd.IsZero() {
				bEnd = now
			}
			if a.start.Before(bEnd) && b.start.Before(aEnd) {
				t.Errorf("overlapping leadership: %s led %s–%s, %s led %s–%s", a.proc, stamp(a.start), stamp(aEnd), b.proc, stamp(b.start), stamp(bEnd))
			}
		}
	}
	if len(terms) != 3 {
		t.Errorf("%d terms of leadership, want 3 (one per round): %v", len(terms), termsString(terms))
	}
}

func checkEventTypes(events []lifecycle.Event, want ...lifecycle.EventType) error {
	got := make([]lifecycle.EventType, len(events))
	for i, e := range events {
		got[i] = e.Type
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("events %v, want %v", got, want)
	}
	return nil
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }

func termsString(terms []*leadership) string {
	var b strings.Builder
	for _, l := range terms {
		fmt.Fprintf(&b, "[%s %s–%s] ", l.proc, stamp(l.start), stamp(l.end))
	}
	return b.String()
}
