package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// phases runs the fault schedule, drains and checks.
func (h *harness) phases(ctx context.Context) error {
	p := h.prof
	enqCtx, stopEnq := context.WithCancel(ctx)
	defer stopEnq()
	enq := h.startEnqueuer(enqCtx)
	canceling := h.cancelJobs(enqCtx, enq, 700*time.Millisecond)

	h.logf("phase 1: baseline load for %s", p.baseline)
	if err := pace(ctx, p.baseline); err != nil {
		return err
	}

	h.logf("phase 2: SIGKILL a random worker every %s, %d times", p.killEvery, p.kills)
	slots := h.workerSlots()
	var killable []string
	for _, s := range slots {
		if !strings.HasPrefix(s, "skew-") {
			killable = append(killable, s)
		}
	}
	for i := 0; i < p.kills; i++ {
		if err := pace(ctx, p.killEvery); err != nil {
			return err
		}
		if err := h.killSlot(ctx, killable[h.intn(len(killable))], "kill"); err != nil {
			return err
		}
	}

	if h.pg != nil {
		if err := h.databaseFaults(ctx); err != nil {
			return err
		}
		if err := h.pauseFaults(ctx, enq); err != nil {
			return err
		}
	}

	if p.skewWorkers > 0 {
		h.logf("phase 5: workers whose clocks are shifted by ±30s join for %s", p.skewPhase)
		for _, s := range slots {
			if strings.HasPrefix(s, "skew-") {
				if _, err := h.startSlot(ctx, s); err != nil {
					return err
				}
			}
		}
		if err := pace(ctx, p.skewPhase); err != nil {
			return err
		}
	}

	if p.leaderKills > 0 {
		if err := h.leaderFaults(ctx); err != nil {
			return err
		}
	}

	if h.serverURL != "" {
		h.logf("phase 7: bad inputs through the HTTP API")
		if err := h.runProbes(ctx); err != nil {
			return err
		}
	}

	h.logf("phase 8: drain (enqueued so far %d of %d; deadline %s)", h.led.count(), p.jobs, p.drain)
	close(enq.hurry)
	deadline := time.Now().Add(p.drain)
	drainCtx, cancelDrain := context.WithDeadline(ctx, deadline)
	defer cancelDrain()
	select {
	case <-enq.done:
	case <-drainCtx.Done():
		stopEnq()
		<-enq.done
		h.problem("the enqueuer had not finished at the drain deadline")
	}
	<-canceling
	if err := h.awaitDrained(drainCtx); err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	h.leaders.stop()
	h.logf("drained; stopping processes and checking")
	h.mu.Lock()
	procs := make([]*proc, 0, len(h.procs))
	for _, p := range h.procs {
		procs = append(procs, p)
	}
	h.mu.Unlock()
	for _, p := range procs {
		p.stop(15 * time.Second)
	}
	return h.checkAll(ctx)
}

// pace waits d (fault pacing, not synchronisation) or until ctx ends.
func pace(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// databaseFaults: crash-restart PostgreSQL, and cut single processes' connections.
func (h *harness) databaseFaults(ctx context.Context) error {
	p := h.prof
	h.logf("phase 3: %d immediate PostgreSQL restarts, %d pg_terminate_backend rounds", p.dbRestarts, p.terminates)
	targets := append([]string{"server"}, h.workerSlots()...)
	restartAt := map[int]bool{}
	for i := 0; i < p.dbRestarts; i++ {
		restartAt[(i+1)*(p.terminates+p.dbRestarts)/(p.dbRestarts+1)] = true
	}
	for i := 0; i < p.terminates+p.dbRestarts; i++ {
		if err := pace(ctx, 2*time.Second); err != nil {
			return err
		}
		if restartAt[i] {
			start := time.Now()
			if err := h.pg.crash(ctx); err != nil {
				return err
			}
			if err := h.awaitDatabase(ctx); err != nil {
				return err
			}
			h.addFault(fault{Kind: "db_restart", All: true, Start: start, End: time.Now()})
			h.summary.DBRestarts++
			h.logf("  PostgreSQL crashed and back in %s", time.Since(start).Round(time.Millisecond))
			continue
		}
		var slot string
		for {
			slot = targets[h.intn(len(targets))]
			if h.proc(slot) != nil {
				break
			}
		}
		pr := h.proc(slot)
		at := time.Now()
		var n int
		err := h.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
			"chaos-"+pr.id).Scan(&n)
		if err != nil {
			return fmt.Errorf("pg_terminate_backend: %w", err)
		}
		ts := []string{pr.id}
		if slot == "server" {
			ts = append(ts, h.remoteIDs()...)
		}
		h.addFault(fault{Kind: "terminate", Targets: ts, Start: at, End: time.Now()})
		h.summary.BackendKills++
		h.logf("  terminated %d connections of %s", n, pr.id)
	}
	return nil
}

// awaitDatabase polls until the database answers again.
func (h *harness) awaitDatabase(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := h.pool.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("PostgreSQL did not come back: %w", err)
		}
		if err := pace(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// pauseFaults SIGSTOPs a worker that is running jobs for twice the lease, then
// SIGCONTs it and waits for its late writes to be refused.
func (h *harness) pauseFaults(ctx context.Context, enq *enqueuer) error {
	p := h.prof
	h.logf("phase 4: %d pauses of a worker for %s (twice the lease)", p.pauses, 2*p.lease)
	var candidates []string
	for _, s := range h.workerSlots() {
		if !strings.HasPrefix(s, "skew-") {
			candidates = append(candidates, s)
		}
	}
	for i := 0; i < p.pauses; i++ {
		if err := pace(ctx, time.Second); err != nil {
			return err
		}
		leader := h.leaders.current()
		var pr *proc
		for _, k := range h.intnPerm(len(candidates)) {
			if c := h.proc(candidates[k]); c != nil && c.id != leader {
				pr = c
				break
			}
		}
		if pr == nil {
			return fmt.Errorf("no worker to pause")
		}
		// Long jobs, so the target is surely holding some when it stops. Held
		// as the database sees it: a handler in flight may be one whose job
		// the canceller has already ended, whose late write is not counted
		// (a worker holding only such a handler was paused, and resumed with
		// nothing to refuse: "no late write was seen refused").
		slow := h.enqueueSlow(ctx, enq, 4*h.prof.concurrency, int(p.lease.Milliseconds()))
		holding := false
		for try := 0; try < 50 && !holding; try++ {
			holding = h.holdsAnyOf(ctx, pr.id, slow)
			if !holding {
				if err := pace(ctx, 100*time.Millisecond); err != nil {
					return err
				}
			}
		}
		if !holding {
			st, _ := h.statsOfProc(pr, 2*time.Second)
			h.problem("pause %d: %s never held one of the slow jobs (its counters: %v); paused anyway", i+1, pr.id, st)
		}
		cursor := h.lines.len()
		start := time.Now()
		if err := pr.signal(sigStop); err != nil {
			return err
		}
		if err := pace(ctx, 2*p.lease); err != nil {
			_ = pr.signal(sigCont)
			return err
		}
		// An expired lease is the holder's until the leader's reaper takes it
		// back: a write that comes first is rightly accepted. Stay stopped until
		// nothing is held, so the late writes are stale. The leader may itself
		// be between terms (PostgreSQL just restarted), hence the margin.
		if err := h.awaitReleased(ctx, pr.id, 5*p.lease+2*p.leaderTTL); err != nil {
			_ = pr.signal(sigCont)
			return err
		}
		// Timed before SIGCONT: a resumed child can print its first refusal
		// before this goroutine runs again, and the reader stamps it then. (A
		// line it wrote before the stop was read during the pause.)
		resumed := time.Now()
		_ = pr.signal(sigCont)
		h.summary.Pauses++
		rec := pauseRecord{id: pr.id, start: start, resumed: resumed}
		// Its heartbeats and reports after the pause must all be refused; wait
		// for the first refusal, then give the rest a moment to arrive.
		h.lines.await(&cursor, 3*p.lease, func(l line) bool {
			return l.Proc == pr.id && len(l.Fields) > 0 && l.Fields[0] == "lost"
		})
		_ = pace(ctx, p.lease/2)
		// A canceled job's "lost" is no stale write refused: not counted.
		rec.rejected = h.countLines(pr.id, "lost", resumed, time.Now()) - h.countCanceledLost(pr.id, resumed, time.Now())
		h.addFault(fault{Kind: "pause", Targets: []string{pr.id}, Start: start, End: time.Now()})
		h.pausesDone = append(h.pausesDone, rec)
		h.summary.StaleRejected += rec.rejected
		h.logf("  paused %s for %s: %d late writes refused", pr.id, resumed.Sub(start).Round(time.Millisecond), rec.rejected)
	}
	return nil
}

// awaitReleased polls until no job is claimed or running under owner id, or
// for at most max; a timeout is a problem, not an error.
func (h *harness) awaitReleased(ctx context.Context, id string, max time.Duration) error {
	deadline := time.Now().Add(max)
	for {
		var n int
		err := h.sqlDB.QueryRowContext(ctx,
			`SELECT count(*) FROM drover_jobs WHERE owner = $1 AND status IN ('claimed', 'running')`, id).Scan(&n)
		switch {
		case err == nil && n == 0:
			return nil
		case time.Now().After(deadline):
			h.problem("pause of %s: it still held %d jobs (err %v) after %s", id, n, err, max)
			return nil
		}
		if err := pace(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func (h *harness) intnPerm(n int) []int {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	return h.rng.Perm(n)
}

// holdsAnyOf says whether worker id is running one of the jobs ids, as the
// database sees it.
func (h *harness) holdsAnyOf(ctx context.Context, id string, ids []int64) bool {
	if len(ids) == 0 {
		return false
	}
	list := make([]string, len(ids))
	for i, j := range ids {
		list[i] = strconv.FormatInt(j, 10)
	}
	var n int
	err := h.sqlDB.QueryRowContext(ctx, `SELECT count(*) FROM drover_jobs WHERE owner = $1 AND status = 'running' AND id IN (`+
		strings.Join(list, ",")+`)`, id).Scan(&n)
	return err == nil && n > 0
}

// enqueueSlow enqueues n ledger jobs that work ms each, and returns the ids
// of those it enqueued.
func (h *harness) enqueueSlow(ctx context.Context, e *enqueuer, n, ms int) []int64 {
	params := make([]drover.EnqueueParams, n)
	seqs := make([]int64, n)
	for i := range params {
		seqs[i] = h.led.take()
		params[i] = drover.EnqueueParams{Kind: KindWork, Args: workArgs{Seq: seqs[i], MS: ms},
			Opts: &drover.EnqueueOpts{IdempotencyKey: idemKey(seqs[i])}}
	}
	var res []drover.EnqueueResult
	if e.retry(ctx, "slow batch", func() (err error) {
		res, err = h.client.EnqueueMany(ctx, params)
		return err
	}) {
		ids := make([]int64, len(res))
		for i, r := range res {
			h.led.ack(seqs[i], r.Job.ID)
			ids[i] = r.Job.ID
		}
		return ids
	}
	return nil
}

// countLines counts lines of kind from proc id read in [from, to].
func (h *harness) countLines(id, kind string, from, to time.Time) int {
	lines, _ := h.lines.since(0)
	n := 0
	for _, l := range lines {
		if (id == "" || l.Proc == id) && len(l.Fields) > 0 && l.Fields[0] == kind && !l.At.Before(from) && !l.At.After(to) {
			n++
		}
	}
	return n
}

// countCanceledLost counts the "lost" lines of proc id read in [from, to] that
// name a job the harness canceled.
func (h *harness) countCanceledLost(id string, from, to time.Time) int {
	lines, _ := h.lines.since(0)
	h.cancels.mu.Lock()
	defer h.cancels.mu.Unlock()
	n := 0
	for _, l := range lines {
		if l.Proc == id && len(l.Fields) == 3 && l.Fields[0] == "lost" && !l.At.Before(from) && !l.At.After(to) {
			if jid, err := strconv.ParseInt(l.Fields[1], 10, 64); err == nil {
				if _, ok := h.cancels.sent[jid]; ok {
					n++
				}
			}
		}
	}
	return n
}

// leaderFaults SIGKILLs whichever process leads, and waits for a successor.
func (h *harness) leaderFaults(ctx context.Context) error {
	p := h.prof
	h.logf("phase 6: SIGKILL the engine leader %d times", p.leaderKills)
	for i := 0; i < p.leaderKills; i++ {
		if err := pace(ctx, time.Second); err != nil {
			return err
		}
		leader, ok := h.leaders.await(ctx, "", 4*p.leaderTTL)
		if !ok {
			h.problem("leader kill %d: no leader within %s", i+1, 4*p.leaderTTL)
			continue
		}
		slot := slotOf(leader)
		if pr := h.proc(slot); pr == nil || pr.id != leader {
			h.problem("leader kill %d: leader %s is no current process", i+1, leader)
			continue
		}
		killed := time.Now()
		if err := h.killSlot(ctx, slot, "leader_kill"); err != nil {
			return err
		}
		h.summary.LeaderKills++
		next, ok := h.leaders.await(ctx, leader, 4*p.leaderTTL)
		if !ok {
			h.problem("leader kill %d: no successor of %s within %s", i+1, leader, 4*p.leaderTTL)
			continue
		}
		took := time.Since(killed)
		h.summary.MaxTakeover = max(h.summary.MaxTakeover, took)
		h.logf("  killed leader %s; %s took over after %s", leader, next, took.Round(time.Millisecond))
	}
	return nil
}

// awaitDrained polls until every job is terminal but the far-future ones.
func (h *harness) awaitDrained(ctx context.Context) error {
	nonTerminal := []lifecycle.Status{}
	for _, s := range lifecycle.Statuses {
		if !s.Terminal() {
			nonTerminal = append(nonTerminal, s)
		}
	}
	for {
		jobs, err := h.drv.JobList(ctx, driver.ListParams{Statuses: nonTerminal, Limit: 100, Ascending: true})
		if err == nil {
			left := 0
			for _, j := range jobs {
				if !h.probes.farFuture[j.ID] {
					left++
				}
			}
			if left == 0 {
				return nil
			}
		}
		if err := pace(ctx, 250*time.Millisecond); err != nil {
			h.problem("drain deadline passed with jobs left")
			return err
		}
	}
}
