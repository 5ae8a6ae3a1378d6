package drivertest_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

// diffSide is one driver of the differential test: its jobs by index and
// every fence each job's claims handed out.
type diffSide struct {
	d      driver.Driver
	ids    []int64
	index  map[int64]int
	fences [][]driver.FenceParams
}

func (s *diffSide) add(j *driver.Job) int {
	if i, ok := s.index[j.ID]; ok {
		return i
	}
	s.ids = append(s.ids, j.ID)
	s.fences = append(s.fences, nil)
	s.index[j.ID] = len(s.ids) - 1
	return len(s.ids) - 1
}

func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, driver.ErrNotFound):
		return "not-found"
	case errors.Is(err, driver.ErrLeaseLost):
		return "lease-lost"
	case errors.Is(err, driver.ErrInvalidTransition):
		return "invalid-transition"
	case errors.Is(err, driver.ErrRequestReused):
		return "request-reused"
	case errors.Is(err, driver.ErrInvalidArgument):
		return "invalid-argument"
	}
	return "error: " + err.Error()
}

func (s *diffSide) jobText(j *driver.Job, t0 time.Time) string {
	if j == nil {
		return "<nil>"
	}
	retryOf := ""
	if j.RetryOf != nil {
		retryOf = strconv.Itoa(s.index[*j.RetryOf])
	}
	runAt := j.RunAt.Sub(t0).String()
	if d := j.RunAt.Sub(j.CreatedAt); j.RetryOf != nil && d < time.Second && d > -time.Second {
		runAt = "(created_at)" // a DLQ requeue's: the wall clock
	}
	return fmt.Sprintf("#%d %s attempt=%d exec=%d max=%d rev=%d run_at=%s err=%q errors=%d replayed=%v retry_of=%s owner=%q",
		s.index[j.ID], j.Status, j.Attempt, j.Executions, j.MaxAttempts, j.Rev, runAt, j.Error, len(j.Errors), j.Replayed, retryOf, j.Owner)
}

// TestDriversAgreeOnRandomCalls runs pseudo-random sequences of calls (many
// with stale fences, some repeating a request_id) on both drivers and compares
// every answer, then every job and its log: cancels of jobs in every status,
// snoozes, retries and fails, DLQ requeues of failed and other jobs, purges,
// retention and reaps, on an injected clock. DROVER_DIFF_SEEDS and DROVER_DIFF_STEPS run more.
func TestDriversAgreeOnRandomCalls(t *testing.T) {
	seeds, steps := 20, 150
	if s := os.Getenv("DROVER_DIFF_STEPS"); s != "" {
		steps, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("DROVER_DIFF_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	for seed := range seeds {
		t.Run(strconv.Itoa(seed), func(t *testing.T) {
			runDifferential(t, uint64(seed), steps)
		})
	}
}

func runDifferential(t *testing.T, seed uint64, steps int) {
	ctx := context.Background()
	sides := []*diffSide{
		{d: testdb.Open(t, "postgres"), index: map[int64]int{}},
		{d: testdb.Open(t, "sqlite"), index: map[int64]int{}},
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	clock := t0
	now := func() *time.Time { c := clock; return &c }
	var log []string
	fatal := func(format string, a ...any) {
		t.Fatalf("seed %d:\n%s\n%s", seed, strings.Join(log, "\n"), fmt.Sprintf(format, a...))
	}
	reqN := 0
	var lastReq string
	reqID := func() string {
		switch r := rng.IntN(10); {
		case r < 5:
			return ""
		case r < 7 && lastReq != "":
			return lastReq
		}
		reqN++
		lastReq = fmt.Sprintf("r%d", reqN)
		return lastReq
	}
	for step := range steps {
		op := rng.IntN(22)
		n := len(sides[0].ids)
		ji, fi := -1, -1
		if n > 0 {
			ji = rng.IntN(n)
			if k := len(sides[0].fences[ji]); k > 0 {
				fi = k - 1
				if rng.IntN(4) == 0 {
					fi = rng.IntN(k)
				}
			}
		}
		rid := reqID()
		maxAtt := 1 + rng.IntN(3)
		delay := time.Duration(rng.IntN(3)) * 5 * time.Second
		perm := rng.IntN(3) == 0
		limit := 1 + rng.IntN(3)
		start := rng.IntN(2) == 0
		adv := time.Duration(rng.IntN(50)) * time.Second
		keyed, keyN := rng.IntN(3) == 0, rng.IntN(3)
		pause := rng.IntN(2) == 0
		var desc string
		answers := make([]string, len(sides))
		for si, s := range sides {
			fence := func() (driver.FenceParams, bool) {
				if ji < 0 || fi < 0 {
					return driver.FenceParams{}, false
				}
				f := s.fences[ji][fi]
				f.RequestID, f.Now, f.LeaseDuration = rid, now(), 30*time.Second
				return f, true
			}
			var a string
			switch op {
			case 0, 1:
				desc = fmt.Sprintf("enqueue max=%d delay=%s keyed=%v key=%d", maxAtt, delay, keyed, keyN)
				ra := clock.Add(delay - time.Second)
				key := ""
				if keyed {
					key = fmt.Sprintf("key-%d", keyN)
				}
				res, err := s.d.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: json.RawMessage(`{}`),
					MaxAttempts: maxAtt, RunAt: &ra, Actor: "t", IdempotencyKey: key}})
				if err == nil {
					s.add(res[0].Job)
					a = fmt.Sprintf("%s existing=%v", s.jobText(res[0].Job, t0), res[0].Existing)
				} else {
					a = errClass(err)
				}
			case 2, 3:
				desc = fmt.Sprintf("claim limit=%d start=%v req=%q", limit, start, rid)
				jobs, err := s.d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Limit: limit, Owner: "w", LeaseDuration: 30 * time.Second,
					Start: start, Now: now(), RequestID: rid})
				a = errClass(err)
				for _, j := range jobs {
					i := s.add(j)
					f := driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken}
					known := false
					for _, g := range s.fences[i] {
						known = known || g.Attempt == f.Attempt
					}
					if !known {
						s.fences[i] = append(s.fences[i], f)
					}
					a += " " + s.jobText(j, t0)
				}
			case 4:
				f, ok := fence()
				desc = fmt.Sprintf("start #%d fence %d req=%q", ji, fi, rid)
				if !ok {
					continue
				}
				j, err := s.d.JobStart(ctx, f)
				a = errClass(err) + " " + s.jobText(j, t0)
			case 5:
				f, ok := fence()
				desc = fmt.Sprintf("heartbeat #%d fence %d req=%q", ji, fi, rid)
				if !ok {
					continue
				}
				r, err := s.d.JobHeartbeat(ctx, driver.HeartbeatParams{FenceParams: f})
				a = fmt.Sprintf("%s cancel=%v lease=%s", errClass(err), r.CancelRequested, r.LeaseExpiresAt.Sub(t0))
			case 6:
				f, ok := fence()
				desc = fmt.Sprintf("complete #%d fence %d req=%q", ji, fi, rid)
				if !ok {
					continue
				}
				j, err := s.d.JobComplete(ctx, driver.CompleteParams{FenceParams: f, Result: json.RawMessage(`{"ok":true}`)})
				a = errClass(err) + " " + s.jobText(j, t0)
			case 7:
				f, ok := fence()
				desc = fmt.Sprintf("fail #%d fence %d perm=%v delay=%s req=%q", ji, fi, perm, delay, rid)
				if !ok {
					continue
				}
				j, err := s.d.JobFail(ctx, driver.FailParams{FenceParams: f, Error: "boom", Permanent: perm, RetryDelay: delay})
				a = errClass(err) + " " + s.jobText(j, t0)
			case 8:
				f, ok := fence()
				desc = fmt.Sprintf("snooze #%d fence %d delay=%s req=%q", ji, fi, delay, rid)
				if !ok {
					continue
				}
				j, err := s.d.JobSnooze(ctx, driver.SnoozeParams{FenceParams: f, Delay: delay})
				a = errClass(err) + " " + s.jobText(j, t0)
			case 9:
				f, ok := fence()
				desc = fmt.Sprintf("unclaim #%d fence %d req=%q", ji, fi, rid)
				if !ok {
					continue
				}
				j, err := s.d.JobUnclaim(ctx, f)
				a = errClass(err) + " " + s.jobText(j, t0)
			case 10:
				desc = fmt.Sprintf("cancel #%d req=%q", ji, rid)
				if ji < 0 {
					continue
				}
				j, err := s.d.JobCancel(ctx, driver.CancelParams{ID: s.ids[ji], RequestID: rid, Now: now()})
				a = errClass(err) + " " + s.jobText(j, t0)
			case 11:
				desc = fmt.Sprintf("advance %s and reap", adv)
				if si == 0 {
					clock = clock.Add(adv)
				}
				jobs, err := s.d.JobReapExpired(ctx, driver.ReapParams{Limit: 100, Now: now()})
				a = errClass(err)
				slices.SortFunc(jobs, func(x, y *driver.Job) int { return cmp.Compare(s.index[x.ID], s.index[y.ID]) })
				for _, j := range jobs {
					a += " " + s.jobText(j, t0)
				}
			case 12:
				desc = fmt.Sprintf("DLQ requeue #%d", ji)
				if ji < 0 {
					continue
				}
				j, err := s.d.JobDLQRequeue(ctx, driver.DLQRequeueParams{ID: s.ids[ji], Actor: "op"})
				if err == nil {
					s.add(j)
				}
				a = errClass(err) + " " + s.jobText(j, t0)
			case 13:
				desc = "DLQ purge"
				if step%5 != 0 { // rarely: keep the DLQ for requeues
					continue
				}
				c, err := s.d.JobDLQPurge(ctx, driver.DLQPurgeParams{})
				a = fmt.Sprintf("%s %d", errClass(err), c)
			case 14:
				desc = "delete finished before now"
				c, err := s.d.JobDeleteFinished(ctx, driver.DeleteFinishedParams{Before: clock, Limit: 100})
				a = fmt.Sprintf("%s %d", errClass(err), c)
			case 16:
				f, ok := fence()
				desc = fmt.Sprintf("complete-many #%d fence %d req=%q", ji, fi, rid)
				if !ok {
					continue
				}
				ps := []driver.CompleteParams{{FenceParams: f}}
				if ji+1 < len(s.ids) && len(s.fences[ji+1]) > 0 {
					g := s.fences[ji+1][len(s.fences[ji+1])-1]
					g.Now = now()
					ps = append(ps, driver.CompleteParams{FenceParams: g, Result: json.RawMessage(`[1]`)})
				}
				for _, o := range s.d.JobCompleteMany(ctx, ps) {
					a += errClass(o.Err) + " " + s.jobText(o.Job, t0) + "; "
				}
			case 17:
				f, ok := fence()
				desc = fmt.Sprintf("fail-at #%d fence %d perm=%v at=%s req=%q", ji, fi, perm, delay-5*time.Second, rid)
				if !ok {
					continue
				}
				j, err := s.d.JobFail(ctx, driver.FailParams{FenceParams: f, Error: "boom\x00", Permanent: perm, RetryAt: clock.Add(delay - 5*time.Second)})
				a = errClass(err) + " " + s.jobText(j, t0)
			case 18:
				f, ok := fence()
				desc = fmt.Sprintf("snooze-at #%d fence %d at=%s req=%q", ji, fi, delay-5*time.Second, rid)
				if !ok {
					continue
				}
				j, err := s.d.JobSnooze(ctx, driver.SnoozeParams{FenceParams: f, RunAt: clock.Add(delay - 5*time.Second)})
				a = errClass(err) + " " + s.jobText(j, t0)
			case 19:
				f, ok := fence()
				desc = fmt.Sprintf("start-many #%d fence %d (lease 0) req=%q", ji, fi, rid)
				if !ok {
					continue
				}
				f.LeaseDuration = 0
				for _, o := range s.d.JobStartMany(ctx, []driver.FenceParams{f}) {
					a += errClass(o.Err) + " " + s.jobText(o.Job, t0)
					if o.Job != nil && o.Job.LeaseExpiresAt != nil {
						a += " lease=" + o.Job.LeaseExpiresAt.Sub(t0).String()
					}
				}
			case 20:
				desc = fmt.Sprintf("claim by id #%d start=%v", ji, start)
				if ji < 0 {
					continue
				}
				jobs, err := s.d.JobClaim(ctx, driver.ClaimParams{ID: s.ids[ji], Queues: []string{"q"}, Limit: 1, Owner: "w2", LeaseDuration: 20 * time.Second,
					Start: start, Now: now(), RequestID: rid})
				a = errClass(err)
				for _, j := range jobs {
					i := s.add(j)
					f := driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken}
					known := false
					for _, g := range s.fences[i] {
						known = known || g.Attempt == f.Attempt
					}
					if !known {
						s.fences[i] = append(s.fences[i], f)
					}
					a += " " + s.jobText(j, t0)
				}
			case 21:
				desc = fmt.Sprintf("pause=%v queue q", pause)
				var err error
				if pause {
					err = s.d.QueuePause(ctx, "q")
				} else {
					err = s.d.QueueResume(ctx, "q")
				}
				a = errClass(err)
			case 15:
				desc = fmt.Sprintf("advance %s", adv)
				if si == 0 {
					clock = clock.Add(adv)
				}
				a = "ok"
			}
			answers[si] = a
		}
		line := fmt.Sprintf("%3d %-50s pg: %s", step, desc, answers[0])
		log = append(log, line)
		if answers[0] != answers[1] {
			fatal("step %d (%s): answers differ:\n  postgres %s\n  sqlite   %s", step, desc, answers[0], answers[1])
		}
	}
	// Every job and its log, on both.
	for i := range sides[0].ids {
		var texts, evs [2]string
		for si, s := range sides {
			j, err := s.d.JobGet(ctx, s.ids[i])
			texts[si] = errClass(err) + " " + s.jobText(j, t0)
			if err == nil {
				if err := lifecycle.CheckInvariants(j.State()); err != nil {
					fatal("job #%d on side %d: %v", i, si, err)
				}
			}
			e, err := s.d.JobEvents(ctx, s.ids[i])
			var b strings.Builder
			for _, x := range e {
				fmt.Fprintf(&b, "[%d %s %s→%s a%d %s %q] ", x.Seq, x.Type, x.From, x.To, x.Attempt, x.Actor, x.RequestID)
			}
			evs[si] = errClass(err) + " " + b.String()
			if err == nil && len(e) > 0 {
				if err := lifecycle.CheckHistory(e); err != nil {
					fatal("job #%d on side %d: history: %v\n%s", i, si, err, evs[si])
				}
			}
		}
		if texts[0] != texts[1] {
			fatal("job #%d differs:\n  postgres %s\n  sqlite   %s", i, texts[0], texts[1])
		}
		if evs[0] != evs[1] {
			fatal("job #%d events differ:\n  postgres %s\n  sqlite   %s", i, evs[0], evs[1])
		}
	}
	if c, ok := sides[0].d.(interface{ CheckInvariants(context.Context) error }); ok {
		if err := c.CheckInvariants(ctx); err != nil {
			fatal("pg invariants: %v", err)
		}
	}
}
