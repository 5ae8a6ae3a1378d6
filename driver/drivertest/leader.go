package drivertest

import (
	"context"
	"time"

	"github.com/drover-dev/drover/driver"
)

// leaderTests cover the leadership lease; time moves through LeaderParams.Now.
var leaderTests = []suiteTest{
	{"ElectExpireResign", testLeader},
}

// wakeupTests cover wake-up delivery.
var wakeupTests = []suiteTest{
	{"PublishReachesSubscriber", testWakeup},
	{"InsertWakesItsQueue", testInsertWakes},
}

// driverTests cover the driver's housekeeping calls.
var driverTests = []suiteTest{
	{"NamePingMigrate", testDriverBasics},
}

func (h *harness) elect(id string, now time.Duration) bool {
	h.t.Helper()
	ok, err := h.d.LeaderAttemptElect(h.ctx, driver.LeaderParams{ID: id, TTL: 30 * time.Second, Now: h.at(now)})
	if err != nil {
		h.t.Fatalf("LeaderAttemptElect(%s, t0+%s): %v", id, now, err)
	}
	return ok
}

func (h *harness) wantLeader(id string, expires time.Duration) {
	h.t.Helper()
	l, err := h.d.LeaderGet(h.ctx)
	if err != nil {
		h.t.Fatalf("LeaderGet: %v", err)
	}
	if l.ID != id || !l.ExpiresAt.Equal(h.tm(expires)) {
		h.t.Errorf("LeaderGet = %s until %s, want %s until %s", l.ID, fmtTime(l.ExpiresAt), id, fmtTime(h.tm(expires)))
	}
}

func testLeader(h *harness) {
	_, err := h.d.LeaderGet(h.ctx)
	h.wantErr(err, driver.ErrNotFound, "LeaderGet before any election")
	steps := []struct {
		id   string
		now  time.Duration
		want bool
		why  string
	}{
		{"a", 0, true, "no leader yet"},
		{"b", time.Second, false, "a's lease is valid"},
		{"a", 10 * time.Second, true, "a extends its lease to t0+40s"},
		{"b", 39 * time.Second, false, "a's extended lease is still valid"},
		{"b", 41 * time.Second, true, "a's lease expired"},
		{"a", 42 * time.Second, false, "b leads now"},
	}
	for _, s := range steps {
		if got := h.elect(s.id, s.now); got != s.want {
			h.t.Errorf("elect %s at t0+%s = %v, want %v (%s)", s.id, s.now, got, s.want, s.why)
		}
		if s.id == "a" && s.now == 10*time.Second {
			h.wantLeader("a", 40*time.Second)
		}
	}
	h.wantLeader("b", 71*time.Second)
	// Resigning as a non-leader changes nothing.
	if err := h.d.LeaderResign(h.ctx, "a"); err != nil {
		h.t.Fatalf("LeaderResign(a) by a non-leader: %v", err)
	}
	h.wantLeader("b", 71*time.Second)
	if h.elect("a", 43*time.Second) {
		h.t.Errorf("elect a after a's own resign (b leads) = true, want false")
	}
	if err := h.d.LeaderResign(h.ctx, "b"); err != nil {
		h.t.Fatalf("LeaderResign(b): %v", err)
	}
	if !h.elect("a", 44*time.Second) {
		h.t.Errorf("elect a after b resigned = false, want true (resign frees the lease at once)")
	}
	h.wantLeader("a", 74*time.Second)
}

// testWakeup publishes until the subscriber hears it: a wake-up is best effort, and
// a PostgreSQL LISTEN may start a moment after WakeupSubscribe returns.
func testWakeup(h *harness) {
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	ch, err := h.d.WakeupSubscribe(ctx)
	if err != nil {
		h.t.Fatalf("WakeupSubscribe: %v", err)
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	publish := func() {
		if err := h.d.WakeupPublish(h.ctx, []string{"q"}); err != nil {
			h.t.Fatalf("WakeupPublish: %v", err)
		}
	}
	publish()
	for {
		select {
		case q, ok := <-ch:
			if !ok {
				h.t.Fatalf("wake-up channel closed before delivering q")
			}
			if q == "q" {
				return
			}
			h.t.Errorf("wake-up delivered %q, want q", q)
		case <-tick.C:
			publish()
		case <-deadline.C:
			h.t.Fatalf("no wake-up for q within 10s of WakeupPublish")
		}
	}
}

// testInsertWakes: an insert wakes the subscribers of each queue that got a job
// claimable now, and of no other queue. (PostgreSQL sends an insert's wake-up
// after its commit, on its own, so it may arrive after a publish made once the
// insert returned: the test waits for it, then sends a marker behind it.)
func testInsertWakes(h *harness) {
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	ch, err := h.d.WakeupSubscribe(ctx)
	if err != nil {
		h.t.Fatalf("WakeupSubscribe: %v", err)
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	publish := func(q string) {
		if err := h.d.WakeupPublish(h.ctx, []string{q}); err != nil {
			h.t.Fatalf("WakeupPublish: %v", err)
		}
	}
	// await reads wake-ups until want arrives, publishing again every 250 ms
	// if again; a wake-up of a queue whose job waits for later fails the test.
	await := func(want string, again bool) {
		h.t.Helper()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case q, ok := <-ch:
				if !ok {
					h.t.Fatalf("wake-up channel closed before delivering %q", want)
				}
				if q == "later" {
					h.t.Fatalf("an insert of a job due in an hour woke its queue")
				}
				if q == want {
					return
				}
			case <-tick.C:
				if again {
					publish(want)
				}
			case <-deadline.C:
				h.t.Fatalf("no wake-up for %q within 10s", want)
			}
		}
	}
	// The subscription is live once it hears a publish.
	publish("probe")
	await("probe", true)

	later := time.Now().Add(time.Hour)
	h.mustInsert(h.params(func(p *driver.InsertParams) { p.Queue, p.RunAt = "later", &later }))
	h.mustInsert(h.params(func(p *driver.InsertParams) { p.Queue = "now" }))
	await("now", false)
	publish("marker")
	await("marker", false)
}

func testDriverBasics(h *harness) {
	if n := h.d.Name(); n != "postgres" && n != "sqlite" {
		h.t.Errorf("Name() = %q, want postgres or sqlite", n)
	}
	if err := h.d.Ping(h.ctx); err != nil {
		h.t.Errorf("Ping: %v", err)
	}
	if err := h.d.MigrateUp(h.ctx); err != nil {
		h.t.Errorf("MigrateUp on a migrated database: %v, want nil (idempotent)", err)
	}
	st, err := h.d.MigrateStatus(h.ctx)
	if err != nil {
		h.t.Fatalf("MigrateStatus: %v", err)
	}
	if len(st.Available) == 0 || st.Dirty || st.Current != st.Available[len(st.Available)-1] {
		h.t.Errorf("MigrateStatus = %+v, want current = the last available version and not dirty", st)
	}
}
