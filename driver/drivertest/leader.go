package drivertest

import (
	"context"
	"slices"
	"time"

	"github.com/drover-dev/drover/driver"
)

// leaderTests cover the leadership lease; time moves through LeaderParams.Now.
var leaderTests = []suiteTest{
	{"ElectExpireResign", testLeader},
	{"SameIDOtherToken", testLeaderToken},
}

// wakeupTests cover wake-up delivery.
var wakeupTests = []suiteTest{
	{"PublishReachesSubscriber", testWakeup},
	{"InsertWakesItsQueue", testInsertWakes},
	{"RetryOrSnoozeDueNowWakesItsQueue", testRetrySnoozeWakes},
	{"ResumeWakesItsQueue", testResumeWakes},
	{"CancelNamesAClaimedJob", testCancelNamesAClaimedJob},
}

// driverTests cover the driver's housekeeping calls.
var driverTests = []suiteTest{
	{"NamePingMigrate", testDriverBasics},
}

// elect asks for the lease as id under the token "token-"+id.
func (h *harness) elect(id string, now time.Duration) bool {
	h.t.Helper()
	return h.electAs(id, "token-"+id, now)
}

func (h *harness) electAs(id, token string, now time.Duration) bool {
	h.t.Helper()
	ok, err := h.d.LeaderAttemptElect(h.ctx, driver.LeaderParams{ID: id, Token: token, TTL: 30 * time.Second, Now: h.at(now)})
	if err != nil {
		h.t.Fatalf("LeaderAttemptElect(%s, %s, t0+%s): %v", id, token, now, err)
	}
	return ok
}

func (h *harness) resign(id, token string) {
	h.t.Helper()
	if err := h.d.LeaderResign(h.ctx, id, token); err != nil {
		h.t.Fatalf("LeaderResign(%s, %s): %v", id, token, err)
	}
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
	h.resign("a", "token-a")
	h.wantLeader("b", 71*time.Second)
	if h.elect("a", 43*time.Second) {
		h.t.Errorf("elect a after a's own resign (b leads) = true, want false")
	}
	h.resign("b", "token-b")
	if !h.elect("a", 44*time.Second) {
		h.t.Errorf("elect a after b resigned = false, want true (resign frees the lease at once)")
	}
	h.wantLeader("a", 74*time.Second)
}

// testLeaderToken: two candidates of one id (two engines given the same
// EngineConfig.ID) are told apart by their tokens. The one whose token took
// the lease extends it; the other neither extends nor resigns it, and takes
// it only once it expired or was resigned, after which the first can do
// neither. The election matched the id alone, so both led at once.
func testLeaderToken(h *harness) {
	steps := []struct {
		token string
		now   time.Duration
		want  bool
		why   string
	}{
		{"one", 0, true, "no leader yet"},
		{"two", time.Second, false, "one's lease is valid: same id, another token"},
		{"one", 10 * time.Second, true, "one extends its lease to t0+40s"},
		{"two", 39 * time.Second, false, "one's extended lease is still valid"},
	}
	for _, s := range steps {
		if got := h.electAs("host", s.token, s.now); got != s.want {
			h.t.Errorf("elect host/%s at t0+%s = %v, want %v (%s)", s.token, s.now, got, s.want, s.why)
		}
	}
	h.wantLeader("host", 40*time.Second)
	h.resign("host", "two")
	if h.electAs("host", "two", 39*time.Second) {
		h.t.Errorf("elect host/two after its resign of one's lease = true, want false (the resign of another token changes nothing)")
	}
	h.wantLeader("host", 40*time.Second)
	if !h.electAs("host", "two", 41*time.Second) {
		h.t.Errorf("elect host/two at t0+41s = false, want true (one's lease expired)")
	}
	if h.electAs("host", "one", 42*time.Second) {
		h.t.Errorf("elect host/one at t0+42s = true, want false (two took the expired lease: one may not extend it)")
	}
	h.wantLeader("host", 71*time.Second)
	h.resign("host", "one")
	h.wantLeader("host", 71*time.Second)
	h.resign("host", "two")
	if !h.electAs("host", "one", 43*time.Second) {
		h.t.Errorf("elect host/one after two resigned = false, want true (resign frees the lease at once)")
	}
	h.wantLeader("host", 73*time.Second)
}

// wakeWatch reads one subscription's wake-ups, for at most 10 s in all.
type wakeWatch struct {
	h        *harness
	ch       <-chan string
	deadline *time.Timer
}

func (h *harness) watchWakeups(ctx context.Context) *wakeWatch {
	ch, err := h.d.WakeupSubscribe(ctx)
	if err != nil {
		h.t.Fatalf("WakeupSubscribe: %v", err)
	}
	w := &wakeWatch{h: h, ch: ch, deadline: time.NewTimer(10 * time.Second)}
	h.t.Cleanup(func() { w.deadline.Stop() })
	return w
}

func (w *wakeWatch) publish(q string) {
	if err := w.h.d.WakeupPublish(w.h.ctx, []string{q}); err != nil {
		w.h.t.Fatalf("WakeupPublish: %v", err)
	}
}

// await reads wake-ups until want arrives, publishing it again every 250 ms if
// again; a wake-up of a queue that is neither want nor one of also fails the
// test.
func (w *wakeWatch) await(want string, again bool, also ...string) {
	w.h.t.Helper()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case q, ok := <-w.ch:
			switch {
			case !ok:
				w.h.t.Fatalf("wake-up channel closed before delivering %q", want)
			case q == want:
				return
			case !slices.Contains(also, q):
				w.h.t.Fatalf("wake-up delivered %q, want %q", q, want)
			}
		case <-tick.C:
			if again {
				w.publish(want)
			}
		case <-w.deadline.C:
			w.h.t.Fatalf("no wake-up for %q within 10s", want)
		}
	}
}

// testWakeup publishes until the subscriber hears it: a wake-up is best effort, and
// a PostgreSQL LISTEN may start a moment after WakeupSubscribe returns.
func testWakeup(h *harness) {
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	w := h.watchWakeups(ctx)
	w.publish("q")
	w.await("q", true)
}

// testInsertWakes: an insert wakes the subscribers of each queue that got a job
// claimable now, and of no other queue. (PostgreSQL sends an insert's wake-up
// after its commit, on its own, so it may arrive after a publish made once the
// insert returned: the test waits for it, then sends a marker behind it.)
func testInsertWakes(h *harness) {
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	w := h.watchWakeups(ctx)
	// The subscription is live once it hears a publish.
	w.publish("probe")
	w.await("probe", true)

	later := time.Now().Add(time.Hour)
	h.mustInsert(h.params(func(p *driver.InsertParams) { p.Queue, p.RunAt = "later", &later }))
	h.mustInsert(h.params(func(p *driver.InsertParams) { p.Queue = "now" }))
	w.await("now", false, "probe")
	w.publish("marker")
	w.await("marker", false, "probe")
}

// testRetrySnoozeWakes: a retry or a snooze that makes its job claimable now
// (no delay: a custom backoff, snooze_seconds 0, a worker's give-back at
// shutdown) wakes its queue, as an insert does; one for later does not.
// PostgreSQL's sent none, so the job waited for a worker's poll.
func testRetrySnoozeWakes(h *harness) {
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	w := h.watchWakeups(ctx)
	w.publish("probe")
	w.await("probe", true)
	// Each job's insert wakes its queue first; the await after each
	// transition is of a wake-up of its own, and one of "later" fails it.
	running := func(q string) *driver.Job {
		h.t.Helper()
		j := h.runningJob(func(p *driver.InsertParams) { p.Queue = q })
		w.await(q, false, "probe")
		return j
	}
	later := running("later")
	if _, err := h.d.JobFail(h.ctx, driver.FailParams{FenceParams: fence(later, h.at(2*time.Second)), Error: "boom", RetryDelay: time.Hour}); err != nil {
		h.t.Fatalf("JobFail with an hour's delay: %v", err)
	}
	retry := running("retry-now")
	if _, err := h.d.JobFail(h.ctx, driver.FailParams{FenceParams: fence(retry, h.at(2*time.Second)), Error: "boom"}); err != nil {
		h.t.Fatalf("JobFail with no delay: %v", err)
	}
	w.await("retry-now", false, "probe")
	snooze := running("snooze-now")
	if _, err := h.d.JobSnooze(h.ctx, driver.SnoozeParams{FenceParams: fence(snooze, h.at(2*time.Second))}); err != nil {
		h.t.Fatalf("JobSnooze with no delay: %v", err)
	}
	w.await("snooze-now", false, "probe")
	w.publish("marker")
	w.await("marker", false, "probe")
}

// testResumeWakes: resuming a queue wakes its subscribers, as an insert does:
// its jobs are claimable again, and a worker that polled it while it was paused
// would otherwise wait out its poll interval.
func testResumeWakes(h *harness) {
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	w := h.watchWakeups(ctx)
	w.publish("probe")
	w.await("probe", true)
	if err := h.d.QueuePause(h.ctx, "resumed"); err != nil {
		h.t.Fatalf("QueuePause: %v", err)
	}
	if err := h.d.QueueResume(h.ctx, "resumed"); err != nil {
		h.t.Fatalf("QueueResume: %v", err)
	}
	w.await("resumed", false, "probe")
	w.publish("marker")
	w.await("marker", false, "probe")
}

// testCancelNamesAClaimedJob: a cancel of a job that has been claimed names
// it to the wake-up subscribers (driver.CanceledWakeup), so that a worker
// running it stops it at once rather than at its next heartbeat; a cancel of
// a job never claimed names none, and neither does a repeat of a cancel. The
// three are sent in that order, and a subscriber hears them in it
// (PostgreSQL delivers notifications in commit order), so the running job's
// being heard after the others says neither of them was sent.
func testCancelNamesAClaimedJob(h *harness) {
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	w := h.watchWakeups(ctx)
	w.publish("probe")
	w.await("probe", true)
	queued := h.mustEnqueue(func(p *driver.InsertParams) { p.Queue = "canceled" })
	running := h.runningJob(func(p *driver.InsertParams) { p.Queue = "canceled" })
	twice := h.runningJob(func(p *driver.InsertParams) { p.Queue = "canceled" })
	w.await("canceled", false, "probe") // the inserts' wake-ups
	cancelJob := func(j *driver.Job, requestID string) {
		h.t.Helper()
		if _, err := h.d.JobCancel(h.ctx, driver.CancelParams{ID: j.ID, RequestID: requestID, Actor: "operator", Now: h.at(2 * time.Second)}); err != nil {
			h.t.Fatalf("JobCancel of job %d (%s): %v", j.ID, j.Status, err)
		}
	}
	cancelJob(twice, "cancel-twice")
	w.await(driver.CanceledWakeup(twice.ID), false, "probe", "canceled")
	cancelJob(queued, "")
	cancelJob(twice, "cancel-twice") // a repeat: the job was canceled already
	cancelJob(running, "")
	w.await(driver.CanceledWakeup(running.ID), false, "probe", "canceled")
	if id, ok := driver.WakeupCanceled(driver.CanceledWakeup(running.ID)); !ok || id != running.ID {
		h.t.Errorf("WakeupCanceled(CanceledWakeup(%d)) = %d, %v", running.ID, id, ok)
	}
	for _, q := range []string{"", "canceled", "!canceled:", "!canceled:x", "!canceled:-1", "!canceled:0"} {
		if id, ok := driver.WakeupCanceled(q); ok {
			h.t.Errorf("WakeupCanceled(%q) = %d, true; want false", q, id)
		}
	}
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
