package drover_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/drover-dev/drover"
)

var noBackoff = drover.WithBackoff(func(int) time.Duration { return 0 })

type addArgs struct {
	A, B int
}

type addResult struct {
	Sum int `json:"sum"`
}

func TestWorkerTypedHandler(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		var seen atomic.Pointer[addArgs]
		drover.Register(ws, "add", func(ctx context.Context, job *drover.Job, args addArgs) (any, error) {
			seen.Store(&args)
			return addResult{Sum: args.A + args.B}, nil
		})
		drover.Register(ws, "nothing", func(ctx context.Context, job *drover.Job, args struct{}) (any, error) {
			return nil, nil
		})
		startWorker(t, c, fastWorkerConfig(ws))

		id := enqueue(t, c, "add", addArgs{A: 2, B: 40}, nil).ID
		bad := enqueue(t, c, "add", map[string]string{"A": "not a number"}, &drover.EnqueueOpts{MaxAttempts: 5}).ID
		empty := enqueue(t, c, "nothing", nil, nil).ID

		j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded {
			t.Fatalf("add job: %s, want succeeded", describe(j))
		}
		if got := seen.Load(); got == nil || *got != (addArgs{A: 2, B: 40}) {
			t.Errorf("handler received %+v, want {A:2 B:40}", got)
		}
		wantJSON(t, "result", j.Result, addResult{Sum: 42})
		if j.Attempt != 1 || j.Executions != 1 || j.Error != "" || len(j.Errors) != 0 || j.FinishedAt == nil {
			t.Errorf("succeeded job: %s finished_at=%v, want one clean attempt", describe(j), j.FinishedAt)
		}

		// Args that do not decode into the handler's type fail at once.
		j = waitStatus(t, c, bad, drover.StatusFailed, drover.StatusSucceeded)
		if j.Status != drover.StatusFailed || j.Executions != 1 || !strings.Contains(j.Error, "decode args") {
			t.Errorf("undecodable args: %s, want failed after 1 execution with a decode error", describe(j))
		}

		j = waitStatus(t, c, empty, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || string(j.Result) != "null" {
			t.Errorf("nil result: %s, want succeeded with result null", describe(j))
		}
	})
}

func TestWorkerRetriesThenSucceeds(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		var calls atomic.Int32
		drover.Register(ws, "flaky", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			calls.Add(1)
			if job.Attempt < 3 {
				return nil, fmt.Errorf("flake on attempt %d", job.Attempt)
			}
			return "ok", nil
		}, noBackoff)
		startWorker(t, c, fastWorkerConfig(ws))

		id := enqueue(t, c, "flaky", nil, nil).ID
		j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Attempt != 3 || j.Executions != 3 || calls.Load() != 3 {
			t.Fatalf("flaky job: %s after %d calls, want succeeded on attempt 3", describe(j), calls.Load())
		}
		if len(j.Errors) != 2 {
			t.Fatalf("errors history has %d entries, want 2: %s", len(j.Errors), describe(j))
		}
		for i, e := range j.Errors {
			if want := fmt.Sprintf("flake on attempt %d", i+1); e.Attempt != i+1 || e.Error != want {
				t.Errorf("errors[%d] = attempt %d %q, want attempt %d %q", i, e.Attempt, e.Error, i+1, want)
			}
		}
		if j.Error != "" {
			t.Errorf("succeeded job has error %q, want none (history only)", j.Error)
		}
		// Each failure went back to queued before the next claim.
		events, err := c.Events(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var retried int
		for _, e := range events {
			if e.Type == "retried" {
				retried++
				if e.From != drover.StatusRunning || e.To != drover.StatusQueued {
					t.Errorf("retried event %s → %s, want running → queued", e.From, e.To)
				}
			}
		}
		if retried != 2 {
			t.Errorf("%d retried events, want 2", retried)
		}
	})
}

func TestWorkerMaxAttemptsExhausted(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "doomed", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			return nil, fmt.Errorf("boom %d", job.Attempt)
		}, noBackoff)
		startWorker(t, c, fastWorkerConfig(ws))

		id := enqueue(t, c, "doomed", nil, &drover.EnqueueOpts{MaxAttempts: 3}).ID
		j := waitStatus(t, c, id, drover.StatusFailed, drover.StatusSucceeded)
		if j.Status != drover.StatusFailed || j.Attempt != 3 || j.Executions != 3 || j.Error != "boom 3" {
			t.Fatalf("doomed job: %s, want failed after 3 attempts with error \"boom 3\"", describe(j))
		}
		if len(j.Errors) != 3 {
			t.Fatalf("errors history has %d entries, want 3: %s", len(j.Errors), describe(j))
		}
		for i, e := range j.Errors {
			if want := fmt.Sprintf("boom %d", i+1); e.Attempt != i+1 || e.Error != want {
				t.Errorf("errors[%d] = attempt %d %q, want attempt %d %q", i, e.Attempt, e.Error, i+1, want)
			}
		}
		dlq, err := c.DLQList(context.Background(), "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(dlq) != 1 || dlq[0].ID != id || len(dlq[0].Errors) != 3 {
			t.Errorf("DLQList = %d jobs, want job %d with its 3 errors", len(dlq), id)
		}
	})
}

func TestWorkerPermanentError(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		var calls atomic.Int32
		drover.Register(ws, "perm", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			calls.Add(1)
			return nil, drover.Permanent(errors.New("card declined"))
		}, noBackoff)
		startWorker(t, c, fastWorkerConfig(ws))

		id := enqueue(t, c, "perm", nil, &drover.EnqueueOpts{MaxAttempts: 5}).ID
		j := waitStatus(t, c, id, drover.StatusFailed, drover.StatusSucceeded)
		if j.Status != drover.StatusFailed || j.Executions != 1 || j.Error != "card declined" || len(j.Errors) != 1 {
			t.Errorf("permanent failure: %s, want failed after 1 execution with error \"card declined\"", describe(j))
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("handler ran %d times, want 1", n)
		}
	})
}

// An error whose text is not valid UTF-8 (bytes from an upstream answer, say)
// is recorded at once, its bad bytes replaced, on both drivers: PostgreSQL
// refused the text, the worker retried the report until its lease ran out, and
// the reaper ran the Permanent job again.
func TestWorkerErrorTextNotUTF8(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		var calls atomic.Int32
		drover.Register(ws, "perm", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			calls.Add(1)
			return nil, drover.Permanent(fmt.Errorf("upstream said %s\x00", []byte{0xff, 0xfe}))
		}, noBackoff)
		drover.Register(ws, "panic", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			panic(string([]byte{'x', 0xc3}))
		}, noBackoff)
		startWorker(t, c, fastWorkerConfig(ws))

		perm := enqueue(t, c, "perm", nil, &drover.EnqueueOpts{MaxAttempts: 5}).ID
		j := waitStatus(t, c, perm, drover.StatusFailed, drover.StatusSucceeded)
		want := "upstream said \uFFFD\uFFFD" // one for the run of bad bytes, one for the NUL
		if j.Status != drover.StatusFailed || j.Executions != 1 || j.Error != want || len(j.Errors) != 1 || j.Errors[0].Error != want {
			t.Errorf("permanent failure: %s, errors %+v; want failed after 1 execution with error %q", describe(j), j.Errors, want)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("handler ran %d times, want 1", n)
		}

		p := enqueue(t, c, "panic", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		j = waitStatus(t, c, p, drover.StatusFailed, drover.StatusSucceeded)
		if j.Executions != 1 || len(j.Errors) != 1 || !strings.Contains(j.Error, "x\uFFFD") || !utf8.ValidString(j.Errors[0].Stack) || j.Errors[0].Stack == "" {
			t.Errorf("panic: %s, errors %+v; want failed after 1 execution, its text and stack valid UTF-8", describe(j), j.Errors)
		}
	})
}

// A handler error whose message is empty or blank is recorded with the same
// stand-in on a local worker as on a remote one (which must send one).
func TestWorkerEmptyErrorMessage(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "blank", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			return nil, errors.New(" ")
		})
		startWorker(t, c, fastWorkerConfig(ws))
		id := enqueue(t, c, "blank", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		j := waitStatus(t, c, id, drover.StatusFailed, drover.StatusSucceeded)
		if want := "handler returned an error with an empty message"; j.Error != want {
			t.Errorf("failure of a blank error: %s, want error %q", describe(j), want)
		}
	})
}

// A worker id the database cannot store is refused when the worker is made;
// on PostgreSQL every claim failed, only logged, and jobs waited for ever.
func TestNewWorkerRefusesABadID(t *testing.T) {
	c := newClient(t, "sqlite", nil)
	for _, id := range []string{"w\x00nul", "w\xffbad", strings.Repeat("w", 201)} {
		cfg := fastWorkerConfig(drover.NewWorkers())
		cfg.ID = id
		_, err := drover.NewWorker(c, cfg)
		var ve *drover.ValidationError
		if !errors.As(err, &ve) || ve.Field != "id" {
			t.Errorf("NewWorker with id %q: %v, want a ValidationError on id", id, err)
		}
	}
}

// An engine id the database cannot store makes Run fail at once: on
// PostgreSQL such an engine never won the election, only logged, so no reaper
// or retention ran; SQLite took the id.
func TestEngineRefusesABadID(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		for _, id := range []string{"e\xffbad", "e\x00nul"} {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			err := drover.NewEngine(c, &drover.EngineConfig{ID: id}).Run(ctx)
			cancel()
			var ve *drover.ValidationError
			if !errors.As(err, &ve) || ve.Field != "id" {
				t.Errorf("Run of an engine with id %q: %v, want a ValidationError on id at once", id, err)
			}
		}
	})
}

// NewEngine without a client is refused by Run, naming it; it panicked.
func TestEngineRefusesANilClient(t *testing.T) {
	e := drover.NewEngine(nil, nil)
	var ve *drover.ValidationError
	if err := e.Run(context.Background()); !errors.As(err, &ve) || ve.Field != "client" {
		t.Errorf("Run of NewEngine(nil, nil): %v, want a ValidationError on client at once", err)
	}
	if e.IsLeader() {
		t.Error("IsLeader of an engine that never ran: true")
	}
}

type snoozeArgs struct {
	For time.Duration `json:"for"`
}

func TestWorkerSnooze(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "snooze", func(ctx context.Context, job *drover.Job, a snoozeArgs) (any, error) {
			if job.Attempt == 1 {
				return nil, drover.Snooze(a.For)
			}
			return "woke", nil
		})
		startWorker(t, c, fastWorkerConfig(ws))

		// A long snooze: back in the queue for later, the execution given back.
		before := time.Now()
		long := enqueue(t, c, "snooze", snoozeArgs{For: time.Hour}, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		j := waitJob(t, c, long, "snoozed", func(j *drover.Job) bool { return j.Attempt == 1 && j.Status == drover.StatusQueued })
		if j.Executions != 0 || j.Error != "" || j.RunAt.Before(before.Add(59*time.Minute)) {
			t.Errorf("snoozed job: %s, want queued ~1h later with 0 executions", describe(j))
		}

		// With max_attempts 1, a snooze does not use up the only attempt.
		short := enqueue(t, c, "snooze", snoozeArgs{For: 50 * time.Millisecond}, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		j = waitStatus(t, c, short, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Attempt != 2 || j.Executions != 1 {
			t.Errorf("job snoozed once with max_attempts 1: %s, want succeeded on attempt 2 with 1 execution", describe(j))
		}
		wantJSON(t, "result", j.Result, "woke")
		if j.StartedAt == nil || j.StartedAt.Before(j.CreatedAt.Add(50*time.Millisecond)) {
			t.Errorf("snoozed job restarted at %v, before its snooze of 50ms after %s ended", j.StartedAt, j.CreatedAt)
		}
	})
}

func TestWorkerPanic(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "panicky", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			if job.Attempt == 1 {
				panic("kaboom")
			}
			return "recovered", nil
		}, noBackoff)
		startWorker(t, c, fastWorkerConfig(ws))

		id := enqueue(t, c, "panicky", nil, nil).ID
		j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Attempt != 2 || len(j.Errors) != 1 {
			t.Fatalf("panicking job: %s, want retried and succeeded on attempt 2", describe(j))
		}
		e := j.Errors[0]
		if !strings.Contains(e.Error, "panic") || !strings.Contains(e.Error, "kaboom") {
			t.Errorf("recorded error %q, want it to mention the panic and its value", e.Error)
		}
		if !strings.Contains(e.Stack, "worker_test.go") {
			t.Errorf("recorded stack does not show the panicking handler (worker_test.go):\n%s", e.Stack)
		}
	})
}

// A handler that returns its context's cause after a timeout (the demo sleep
// kind does) is recorded with the timeout said once.
func TestWorkerTimeoutCauseSaidOnce(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "slow", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}, noBackoff)
		startWorker(t, c, fastWorkerConfig(ws))

		id := enqueue(t, c, "slow", nil, &drover.EnqueueOpts{Timeout: 100 * time.Millisecond, MaxAttempts: 1}).ID
		j := waitStatus(t, c, id, drover.StatusFailed)
		if want := "job timed out after 100ms"; j.Error != want {
			t.Errorf("recorded error %q, want %q", j.Error, want)
		}
	})
}

// Jobs of one claim share the deadline context of their timeout (the parent of
// each job's own): each handler's context still says its own deadline, ends
// with context.DeadlineExceeded and its own timeout as the cause, and so does
// a context derived from it; one job's cancellation is not another's.
func TestWorkerTimeoutContextOfAClaim(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		type seen struct {
			timeout         time.Duration
			deadline        time.Time
			hasDeadline     bool
			err, derived    error
			cause           string
			longDoneAtShort bool
		}
		seenCh := make(chan seen, 3)
		var mu sync.Mutex
		var long context.Context // the 300ms job's handler's context
		ws := drover.NewWorkers()
		drover.Register(ws, "deadline", func(ctx context.Context, job *drover.Job, args struct{ Ms int }) (any, error) {
			mu.Lock()
			if args.Ms == 300 {
				long = ctx
			}
			mu.Unlock()
			derived, cancel := context.WithCancel(ctx)
			defer cancel()
			<-derived.Done()
			d, ok := ctx.Deadline()
			s := seen{timeout: time.Duration(args.Ms) * time.Millisecond, deadline: d, hasDeadline: ok,
				err: ctx.Err(), derived: derived.Err(), cause: fmt.Sprint(context.Cause(ctx))}
			if args.Ms == 150 {
				mu.Lock()
				s.longDoneAtShort = long != nil && long.Err() != nil
				mu.Unlock()
			}
			seenCh <- s
			return nil, context.Cause(ctx)
		}, noBackoff)
		// Enqueued before the worker starts: one claim takes all three.
		var ids []int64
		for _, ms := range []int{300, 150, 150} {
			ids = append(ids, enqueue(t, c, "deadline", map[string]int{"ms": ms},
				&drover.EnqueueOpts{Timeout: time.Duration(ms) * time.Millisecond, MaxAttempts: 1}).ID)
		}
		startWorker(t, c, fastWorkerConfig(ws))
		deadlines := map[time.Duration][]time.Time{}
		for range 3 {
			s := waitChan(t, seenCh, "a handler's context to end")
			if !s.hasDeadline || !errors.Is(s.err, context.DeadlineExceeded) || !errors.Is(s.derived, context.DeadlineExceeded) {
				t.Errorf("timeout %s: deadline set %v, Err %v, derived context's Err %v; want a deadline and DeadlineExceeded for both",
					s.timeout, s.hasDeadline, s.err, s.derived)
			}
			if want := "job timed out after " + s.timeout.String(); s.cause != want {
				t.Errorf("timeout %s: context.Cause %q, want %q", s.timeout, s.cause, want)
			}
			if s.longDoneAtShort {
				t.Errorf("the 300ms job's context had ended when a 150ms job's timed out")
			}
			deadlines[s.timeout] = append(deadlines[s.timeout], s.deadline)
		}
		if d := deadlines[150*time.Millisecond]; len(d) != 2 || !d[0].Equal(d[1]) {
			t.Errorf("deadlines of the two 150ms jobs of one claim: %v, want the same", d)
		} else if l := deadlines[300*time.Millisecond]; len(l) != 1 || l[0].Sub(d[0]) != 150*time.Millisecond {
			t.Errorf("deadline of the 300ms job %v, of the 150ms ones %v: want 150ms apart (one claim, one lease start)", l, d[0])
		}
		for _, id := range ids {
			if j := waitStatus(t, c, id, drover.StatusFailed); !strings.HasPrefix(j.Error, "job timed out after ") {
				t.Errorf("job %d: error %q, want its timeout", id, j.Error)
			}
		}
	})
}

func TestWorkerTimeout(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "slow", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			if job.Attempt == 1 {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return "fast enough", nil
		}, noBackoff)
		startWorker(t, c, fastWorkerConfig(ws))

		id := enqueue(t, c, "slow", nil, &drover.EnqueueOpts{Timeout: 100 * time.Millisecond, MaxAttempts: 2}).ID
		j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Attempt != 2 || len(j.Errors) != 1 {
			t.Fatalf("timed-out job: %s, want retried and succeeded on attempt 2", describe(j))
		}
		if e := j.Errors[0].Error; !strings.Contains(e, "timed out") || !strings.Contains(e, "100ms") {
			t.Errorf("recorded error %q, want it to say the job timed out after 100ms", e)
		}
	})
}

func TestWorkerAbandonsHandlerIgnoringContext(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		block := make(chan struct{})
		var stuckCalls atomic.Int32
		drover.Register(ws, "stuck", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			if stuckCalls.Add(1) == 1 {
				<-block // ignores ctx
			}
			return "second try", nil
		}, noBackoff)
		drover.Register(ws, "ok", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			return "ok", nil
		})
		cfg := fastWorkerConfig(ws)
		// The stuck handler keeps its slot after it is abandoned (see
		// TestAbandonedHandlerKeepsItsSlot); the other runs the rest.
		cfg.Queues = map[string]int{drover.DefaultQueue: 2}
		cfg.TimeoutGrace = 200 * time.Millisecond
		startWorker(t, c, cfg)
		var unblock sync.Once
		t.Cleanup(func() { unblock.Do(func() { close(block) }) }) // runs before the worker stops

		stuck := enqueue(t, c, "stuck", nil, &drover.EnqueueOpts{Timeout: 100 * time.Millisecond, MaxAttempts: 2}).ID
		waitJob(t, c, stuck, "running", func(j *drover.Job) bool { return j.Status == drover.StatusRunning })
		sibling := enqueue(t, c, "ok", nil, nil).ID

		if j := waitStatus(t, c, sibling, drover.StatusSucceeded, drover.StatusFailed); j.Status != drover.StatusSucceeded {
			t.Errorf("sibling job behind an abandoned handler: %s, want succeeded", describe(j))
		}
		// This worker runs the retry only once the abandoned handler has
		// returned (TestAbandonedHandlersRetryDoesNotRunBesideIt).
		waitJob(t, c, stuck, "abandoned", func(j *drover.Job) bool { return len(j.Errors) == 1 })
		unblock.Do(func() { close(block) })
		j := waitStatus(t, c, stuck, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Executions != 2 || len(j.Errors) != 1 {
			t.Fatalf("stuck job: %s, want abandoned on its first execution and succeeded on its second", describe(j))
		}
		if e := j.Errors[0].Error; !strings.Contains(e, "abandoned") || !strings.Contains(e, "200ms") {
			t.Errorf("recorded error %q, want it to say the handler was abandoned after the 200ms grace", e)
		}
	})
}

func TestWorkerNoHandler(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "ok", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			return "ok", nil
		})
		cfg := fastWorkerConfig(ws)
		cfg.Backoff = func(int) time.Duration { return time.Hour }
		startWorker(t, c, cfg)

		const want = `no handler for kind "x"`
		once := enqueue(t, c, "x", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		j := waitStatus(t, c, once, drover.StatusFailed, drover.StatusSucceeded)
		if j.Status != drover.StatusFailed || !strings.Contains(j.Error, want) {
			t.Errorf("unhandled kind with max_attempts 1: %s, want failed with %q", describe(j), want)
		}

		before := time.Now()
		retried := enqueue(t, c, "x", nil, &drover.EnqueueOpts{MaxAttempts: 5}).ID
		j = waitJob(t, c, retried, "retried", func(j *drover.Job) bool { return j.Attempt >= 1 && j.Status == drover.StatusQueued })
		if len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, want) || j.RunAt.Before(before.Add(59*time.Minute)) {
			t.Errorf("unhandled kind: %s, want queued an hour later with error %q", describe(j), want)
		}
		// Work enqueued later still flows, and the unhandled job is not claimed again early.
		sibling := enqueue(t, c, "ok", nil, nil).ID
		waitStatus(t, c, sibling, drover.StatusSucceeded)
		if j := getJob(t, c, retried); j.Attempt != 1 || j.Status != drover.StatusQueued {
			t.Errorf("unhandled job after its backoff began: %s, want still attempt 1, queued", describe(j))
		}
	})
}

func TestWorkerCancelRunningJob(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		started := make(chan struct{})
		stopped := make(chan error, 1)
		drover.Register(ws, "long", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			close(started)
			<-ctx.Done()
			stopped <- context.Cause(ctx)
			return nil, ctx.Err()
		})
		cfg := fastWorkerConfig(ws)
		cfg.HeartbeatInterval = 50 * time.Millisecond
		obs := &outcomes{finished: make(chan string, 4), lost: make(chan int64, 4)}
		cfg.Observer = obs
		w := startWorker(t, c, cfg)

		id := enqueue(t, c, "long", nil, nil).ID
		waitChan(t, started, "the handler to start")
		if _, err := c.Cancel(context.Background(), id); err != nil {
			t.Fatalf("Cancel of a running job: %v", err)
		}
		cause := waitChan(t, stopped, "the handler's context to be canceled")
		if cause == nil || !strings.Contains(cause.Error(), "canceled by an operator") {
			t.Errorf("handler context cause = %v, want the operator cancel", cause)
		}
		// A cancel is not a lost lease (an alert on those fired at every
		// cancel): the observer hears it as the outcome "canceled".
		if got := waitChan(t, obs.finished, "the observer to hear of the canceled job"); got != "canceled" {
			t.Errorf("observer's outcome %q, want canceled", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if n, l := w.Stats().Canceled.Load(), w.Stats().LeaseLost.Load(); n != 1 || l != 0 || len(obs.lost) != 0 {
			t.Errorf("stats: canceled %d, lease lost %d, observer's lost leases %d; want 1, 0, 0", n, l, len(obs.lost))
		}
		j := getJob(t, c, id)
		if j.Status != drover.StatusCanceled || j.Error != "" || j.Result != nil || len(j.Errors) != 0 {
			t.Errorf("canceled job after the handler returned: %s, want canceled and untouched", describe(j))
		}
	})
}

func TestWorkerQueueConcurrency(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		var cur, peak atomic.Int32
		drover.Register(ws, "busy", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			n := cur.Add(1)
			defer cur.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			// Hold the slot until a second handler runs too, or a short while:
			// enough for a third to start if the limit were not enforced.
			deadline := time.After(100 * time.Millisecond)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for cur.Load() < 2 {
				select {
				case <-deadline:
					return nil, nil
				case <-tick.C:
				}
			}
			<-deadline
			return nil, nil
		})
		var ids []int64
		for range 8 {
			ids = append(ids, enqueue(t, c, "busy", nil, &drover.EnqueueOpts{Queue: "q"}).ID)
		}
		cfg := fastWorkerConfig(ws)
		cfg.Queues = map[string]int{"q": 2}
		startWorker(t, c, cfg)
		for _, id := range ids {
			waitStatus(t, c, id, drover.StatusSucceeded)
		}
		if p := peak.Load(); p != 2 {
			t.Errorf("at most %d handlers ran at once with concurrency 2, want exactly 2", p)
		}
	})
}

func TestWorkerStopWaitsForRunningJob(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		started, release := make(chan struct{}), make(chan struct{})
		var ctxErr atomic.Value
		drover.Register(ws, "job", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			close(started)
			<-release
			ctxErr.Store(fmt.Sprint(ctx.Err()))
			return "finished", nil
		})
		w, err := drover.NewWorker(c, fastWorkerConfig(ws))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		id := enqueue(t, c, "job", nil, nil).ID
		waitChan(t, started, "the handler to start")

		stopErr := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			stopErr <- w.Stop(ctx)
		}()
		close(release)
		if err := waitChan(t, stopErr, "Stop to return"); err != nil {
			t.Errorf("Stop: %v, want nil", err)
		}
		if j := getJob(t, c, id); j.Status != drover.StatusSucceeded {
			t.Errorf("job running at Stop: %s, want succeeded when Stop returns", describe(j))
		}
		if got := ctxErr.Load(); got != "<nil>" {
			t.Errorf("handler context during a graceful stop: err %v, want not canceled", got)
		}
		// Stop is idempotent.
		if err := w.Stop(context.Background()); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	})
}

// Stop called from two goroutines at once (a signal handler and a deferred
// Stop, say): neither returns before the worker has stopped. The second
// returned nil at once, with the handler still running and its job still
// running in the database: a caller that then closed the driver lost the
// outcome, and the job waited for its lease to expire.
func TestWorkerConcurrentStopsBothWait(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		started := make(chan struct{})
		var returned atomic.Bool
		drover.Register(ws, "job", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			close(started)
			<-ctx.Done() // until the hard stop of a Stop whose deadline passed
			returned.Store(true)
			return nil, context.Cause(ctx)
		}, noBackoff)
		w, err := drover.NewWorker(c, fastWorkerConfig(ws))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		id := enqueue(t, c, "job", nil, nil).ID
		waitChan(t, started, "the handler to start")

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		type stopped struct {
			err     error
			early   bool // returned before the handler did
			running string
		}
		results := make(chan stopped, 2)
		for range 2 {
			go func() {
				err := w.Stop(ctx)
				s := stopped{err: err, early: !returned.Load()}
				if j, gerr := c.Get(context.Background(), id); gerr != nil || j.Status == drover.StatusRunning || j.Status == drover.StatusClaimed {
					s.running = fmt.Sprintf("%v %v", gerr, j)
					if j != nil {
						s.running = describe(j)
					}
				}
				results <- s
			}()
		}
		for range 2 {
			r := waitChan(t, results, "Stop to return")
			if r.early {
				t.Errorf("a Stop returned (err %v) while the handler was still running", r.err)
			}
			if r.running != "" {
				t.Errorf("a Stop returned (err %v) with the job not yet given back: %s", r.err, r.running)
			}
			if !errors.Is(r.err, context.DeadlineExceeded) {
				t.Errorf("Stop past its deadline: %v, want context.DeadlineExceeded", r.err)
			}
		}
		if err := w.Stop(context.Background()); err != nil {
			t.Errorf("Stop of a stopped worker: %v, want nil", err)
		}
	})
}

func TestWorkerStopDeadlineRetriesRunningJob(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		started := make(chan struct{})
		drover.Register(ws, "job", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			close(started)
			<-ctx.Done()
			return nil, context.Cause(ctx) // as the demo's and the chaos harness's handlers do
		}, noBackoff)
		w, err := drover.NewWorker(c, fastWorkerConfig(ws))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		id := enqueue(t, c, "job", nil, nil).ID
		waitChan(t, started, "the handler to start")

		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := w.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Stop past its deadline: err = %v, want context.DeadlineExceeded", err)
		}
		j := getJob(t, c, id)
		if j.Status != drover.StatusQueued || j.Executions != 1 || len(j.Errors) != 1 || j.Owner != "" {
			t.Fatalf("job interrupted by shutdown: %s owner=%q, want queued for retry with 1 error", describe(j), j.Owner)
		}
		if e := j.Errors[0].Error; strings.Count(e, "shutting down") != 1 {
			t.Errorf("recorded error %q, want it to say once that the worker was shutting down", e)
		}
	})
}

func TestWorkerHonoursRunAt(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		var mu sync.Mutex
		var ran []int64
		drover.Register(ws, "job", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			mu.Lock()
			ran = append(ran, job.ID)
			mu.Unlock()
			return nil, nil
		})
		later := enqueue(t, c, "job", nil, &drover.EnqueueOpts{RunAt: time.Now().Add(time.Hour)}).ID
		soon := enqueue(t, c, "job", nil, &drover.EnqueueOpts{RunAt: time.Now().Add(300 * time.Millisecond)}).ID
		now := enqueue(t, c, "job", nil, nil).ID
		startWorker(t, c, fastWorkerConfig(ws))

		waitStatus(t, c, now, drover.StatusSucceeded)
		j := waitStatus(t, c, soon, drover.StatusSucceeded)
		if j.StartedAt == nil || j.StartedAt.Before(j.RunAt) {
			t.Errorf("job with run_at %s started at %v, before its run_at", j.RunAt.Format(time.RFC3339Nano), j.StartedAt)
		}
		if j := getJob(t, c, later); j.Status != drover.StatusQueued || j.Attempt != 0 {
			t.Errorf("job due in an hour: %s, want queued and never claimed", describe(j))
		}
		mu.Lock()
		defer mu.Unlock()
		if slices.Contains(ran, later) || len(ran) != 2 {
			t.Errorf("handler ran jobs %v, want only %d and %d", ran, now, soon)
		}
	})
}

func TestWorkerConfigValidation(t *testing.T) {
	c := newClient(t, "sqlite", nil)
	ws := drover.NewWorkers()
	for _, tc := range []struct {
		name  string
		cfg   drover.WorkerConfig
		field string
	}{
		{"concurrency 0", drover.WorkerConfig{Workers: ws, Queues: map[string]int{"q": 0}}, "concurrency"},
		{"negative concurrency", drover.WorkerConfig{Workers: ws, Queues: map[string]int{"q": -1}}, "concurrency"},
		// Accepted, these overflowed the bound on jobs in flight (the worker never
		// claimed) or made Start panic (helper-39).
		{"huge concurrency", drover.WorkerConfig{Workers: ws, Queues: map[string]int{"q": 1 << 62}}, "concurrency"},
		{"huge completion batch", drover.WorkerConfig{Workers: ws, CompletionBatch: math.MaxInt}, "completion_batch"},
		{"negative completion batch", drover.WorkerConfig{Workers: ws, CompletionBatch: -1}, "completion_batch"},
		{"nanosecond heartbeat", drover.WorkerConfig{Workers: ws, HeartbeatInterval: time.Nanosecond}, "heartbeat_interval"},
		{"nanosecond poll", drover.WorkerConfig{Workers: ws, PollInterval: time.Nanosecond}, "poll_interval"},
		{"negative poll", drover.WorkerConfig{Workers: ws, PollInterval: -time.Second}, "poll_interval"},
		{"bad queue name", drover.WorkerConfig{Workers: ws, Queues: map[string]int{"a b": 1}}, "queue"},
		{"heartbeat equal to lease", drover.WorkerConfig{Workers: ws, LeaseDuration: time.Second, HeartbeatInterval: time.Second}, "heartbeat_interval"},
		{"heartbeat above lease", drover.WorkerConfig{Workers: ws, LeaseDuration: time.Second, HeartbeatInterval: 2 * time.Second}, "heartbeat_interval"},
		{"tiny lease", drover.WorkerConfig{Workers: ws, LeaseDuration: time.Millisecond}, "lease_duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := drover.NewWorker(c, &tc.cfg)
			wantInvalid(t, err, tc.field)
		})
	}
	if _, err := drover.NewWorker(c, &drover.WorkerConfig{}); err == nil {
		t.Error("NewWorker without Workers: no error")
	}
	if _, err := drover.NewWorker(c, &drover.WorkerConfig{Workers: ws}); err != nil {
		t.Errorf("NewWorker with defaults: %v", err)
	}
}

func TestWorkerRegisterPanicsOnBadKind(t *testing.T) {
	ws := drover.NewWorkers()
	h := func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) { return nil, nil }
	drover.Register(ws, "k", h)
	for _, kind := range []string{"", "has space", "k"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", kind)
				}
			}()
			drover.Register(ws, kind, h)
		}()
	}
	if got := ws.Kinds(); !slices.Equal(got, []string{"k"}) {
		t.Errorf("Kinds() = %v, want [k]", got)
	}
}

// Register refuses at start-up what could never run: a nil registry or
// handler, and args types no JSON object decodes into; the types one does
// are accepted.
func TestRegisterRefusesWhatCannotRun(t *testing.T) {
	panics := func(what, want string, register func()) {
		t.Helper()
		defer func() {
			t.Helper()
			r := recover()
			if msg, _ := r.(string); r == nil || !strings.Contains(msg, want) {
				t.Errorf("%s: panic %v, want one saying %q", what, r, want)
			}
		}()
		register()
	}
	ws := drover.NewWorkers()
	panics("a nil registry", "nil *Workers", func() {
		drover.Register(nil, "k", func(context.Context, *drover.Job, struct{}) (any, error) { return nil, nil })
	})
	panics("a nil handler", "nil handler", func() { drover.Register[struct{}](ws, "k", nil) })
	panics("int args", "args type int cannot hold a JSON object", func() {
		drover.Register(ws, "k", func(context.Context, *drover.Job, int) (any, error) { return nil, nil })
	})
	panics("[]string args", "args type []string", func() {
		drover.Register(ws, "k", func(context.Context, *drover.Job, []string) (any, error) { return nil, nil })
	})
	panics("*string args", "args type *string", func() {
		drover.Register(ws, "k", func(context.Context, *drover.Job, *string) (any, error) { return nil, nil })
	})
	panics("fmt.Stringer args", "args type fmt.Stringer", func() {
		drover.Register(ws, "k", func(context.Context, *drover.Job, fmt.Stringer) (any, error) { return nil, nil })
	})
	type email struct{ To string }
	drover.Register(ws, "struct", func(context.Context, *drover.Job, email) (any, error) { return nil, nil })
	drover.Register(ws, "pointer", func(context.Context, *drover.Job, *email) (any, error) { return nil, nil })
	drover.Register(ws, "map", func(context.Context, *drover.Job, map[string]any) (any, error) { return nil, nil })
	drover.Register(ws, "int-keys", func(context.Context, *drover.Job, map[int]string) (any, error) { return nil, nil })
	drover.Register(ws, "any", func(context.Context, *drover.Job, any) (any, error) { return nil, nil })
	drover.Register(ws, "raw", func(context.Context, *drover.Job, json.RawMessage) (any, error) { return nil, nil })
	drover.Register(ws, "time", func(context.Context, *drover.Job, time.Time) (any, error) { return nil, nil }) // a struct
	if got := ws.Kinds(); len(got) != 7 {
		t.Errorf("Kinds() = %v, want the 7 accepted", got)
	}
}

func TestWorkerKindAndDefaultTimeouts(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		block := func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		drover.Register(ws, "kind-timeout", block, drover.WithTimeout(100*time.Millisecond))
		drover.Register(ws, "default-timeout", block)
		cfg := fastWorkerConfig(ws)
		cfg.DefaultTimeout = 150 * time.Millisecond
		startWorker(t, c, cfg)

		for k, want := range map[string]string{"kind-timeout": "100ms", "default-timeout": "150ms"} {
			id := enqueue(t, c, k, nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
			j := waitStatus(t, c, id, drover.StatusFailed, drover.StatusSucceeded)
			if j.Status != drover.StatusFailed || !strings.Contains(j.Error, "timed out after "+want) {
				t.Errorf("%s: %s, want failed with a timeout after %s", k, describe(j), want)
			}
		}
	})
}

// A handler running longer than its lease keeps it by heartbeating, even with the
// lease reaper running.
func TestWorkerHeartbeatKeepsLease(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ctx, cancel := context.WithCancel(context.Background())
		engineDone := make(chan struct{})
		go func() {
			defer close(engineDone)
			drover.NewEngine(c, &drover.EngineConfig{ID: "test-engine", LeaderTTL: time.Second, ReapInterval: 50 * time.Millisecond}).Run(ctx)
		}()
		t.Cleanup(func() { cancel(); <-engineDone })

		ws := drover.NewWorkers()
		drover.Register(ws, "long", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			select { // work for three lease lengths
			case <-time.After(1500 * time.Millisecond):
				return "done", nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		})
		cfg := fastWorkerConfig(ws)
		cfg.LeaseDuration, cfg.HeartbeatInterval = 500*time.Millisecond, 100*time.Millisecond
		startWorker(t, c, cfg)

		id := enqueue(t, c, "long", nil, nil).ID
		j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Attempt != 1 || len(j.Errors) != 0 {
			t.Errorf("job running past its lease with heartbeats: %s, want succeeded on attempt 1", describe(j))
		}
	})
}

func TestWorkerClaimOrder(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		var mu sync.Mutex
		var order []string
		drover.Register(ws, "job", func(ctx context.Context, job *drover.Job, a struct{ Name string }) (any, error) {
			mu.Lock()
			order = append(order, a.Name)
			mu.Unlock()
			return nil, nil
		})
		var ids []int64
		for _, j := range []struct {
			name string
			prio int
		}{{"low", 5}, {"first", 0}, {"second", 0}, {"mid", 1}} {
			ids = append(ids, enqueue(t, c, "job", map[string]string{"Name": j.name}, &drover.EnqueueOpts{Priority: j.prio}).ID)
		}
		cfg := fastWorkerConfig(ws)
		cfg.Queues = map[string]int{drover.DefaultQueue: 1}
		startWorker(t, c, cfg)
		for _, id := range ids {
			waitStatus(t, c, id, drover.StatusSucceeded)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"first", "second", "mid", "low"}; !slices.Equal(order, want) {
			t.Errorf("ran in order %v, want %v (priority, then enqueue order)", order, want)
		}
	})
}

// Every job enqueued comes out succeeded exactly once, across several queues.
func TestWorkerManyJobsManyQueues(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		var mu sync.Mutex
		runs := map[int64]int{}
		drover.Register(ws, "n", func(ctx context.Context, job *drover.Job, a struct{ I int }) (any, error) {
			mu.Lock()
			runs[job.ID]++
			mu.Unlock()
			return a.I * 2, nil
		})
		cfg := fastWorkerConfig(ws)
		cfg.Queues = map[string]int{"a": 4, "b": 3}
		cfg.ClaimBatch = 2
		startWorker(t, c, cfg)

		var params []drover.EnqueueParams
		for i := range 40 {
			q := []string{"a", "b"}[i%2]
			params = append(params, drover.EnqueueParams{Kind: "n", Args: map[string]int{"I": i}, Opts: &drover.EnqueueOpts{Queue: q}})
		}
		res, err := c.EnqueueMany(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			j := waitStatus(t, c, r.Job.ID, drover.StatusSucceeded, drover.StatusFailed)
			if j.Status != drover.StatusSucceeded {
				t.Fatalf("job %d: %s, want succeeded", i, describe(j))
			}
			wantJSON(t, fmt.Sprintf("result of job %d", i), j.Result, i*2)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range res {
			if n := runs[r.Job.ID]; n != 1 {
				t.Errorf("job %d ran %d times, want once", r.Job.ID, n)
			}
		}
	})
}

func TestWorkerUnencodableResult(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "bad-result", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			return func() {}, nil
		})
		drover.Register(ws, "good", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			return 1, nil
		})
		w := startWorker(t, c, fastWorkerConfig(ws))

		bad := enqueue(t, c, "bad-result", nil, &drover.EnqueueOpts{MaxAttempts: 5}).ID
		j := waitStatus(t, c, bad, drover.StatusFailed, drover.StatusSucceeded)
		if j.Status != drover.StatusFailed || j.Executions != 1 || !strings.Contains(j.Error, "encode result") {
			t.Errorf("handler returning an unencodable result: %s, want failed at once with an encode error", describe(j))
		}
		good := enqueue(t, c, "good", nil, nil).ID
		waitStatus(t, c, good, drover.StatusSucceeded)
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := w.Stop(ctx); err != nil { // counters are final once Stop returns
			t.Fatalf("Stop: %v", err)
		}
		st := w.Stats()
		if s, f := st.Succeeded.Load(), st.Failed.Load(); s != 1 || f != 1 {
			t.Errorf("worker stats: %d succeeded, %d failed; want 1 and 1", s, f)
		}
	})
}

func TestWorkerRun(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "job", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			return nil, nil
		})
		w, err := drover.NewWorker(c, fastWorkerConfig(ws))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		runErr := make(chan error, 1)
		go func() { runErr <- w.Run(ctx, 5*time.Second) }()
		id := enqueue(t, c, "job", nil, nil).ID
		waitStatus(t, c, id, drover.StatusSucceeded)
		cancel()
		if err := waitChan(t, runErr, "Run to return after its context ended"); err != nil {
			t.Errorf("Run: %v, want nil after a clean shutdown", err)
		}
		if err := w.Start(context.Background()); err == nil {
			t.Error("Start after Run ended: no error, want one (a worker starts once)")
		}
	})
}

// A Worker runs once: a second Start is refused, after Stop with an error
// that says so (it said "already started" of a stopped worker).
func TestWorkerStartsOnce(t *testing.T) {
	c := newClient(t, "sqlite", nil)
	ws := drover.NewWorkers()
	drover.Register(ws, "k", func(context.Context, *drover.Job, struct{}) (any, error) { return nil, nil })
	w, err := drover.NewWorker(c, fastWorkerConfig(ws))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err == nil || !strings.Contains(err.Error(), "already started") {
		t.Errorf("a second Start: %v, want already started", err)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err == nil || !strings.Contains(err.Error(), "a Worker runs once") {
		t.Errorf("Start after Stop: %v, want it to say a Worker runs once", err)
	}
}

// A worker without a handler would claim jobs only to fail them into the DLQ:
// Start refuses it, claims nothing, and starts once a handler is registered.
func TestWorkerWithoutHandlersDoesNotStart(t *testing.T) {
	c := newClient(t, "sqlite", nil)
	id := enqueue(t, c, "k", nil, nil).ID
	ws := drover.NewWorkers()
	w, err := drover.NewWorker(c, fastWorkerConfig(ws))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Start(ctx); err == nil || !strings.Contains(err.Error(), "no handler") {
		t.Fatalf("Start without a handler: %v, want it refused", err)
	}
	if j := getJob(t, c, id); j.Status != drover.StatusQueued || j.Attempt != 0 {
		t.Fatalf("after the refused Start: %s, want queued, never claimed", describe(j))
	}
	drover.Register(ws, "k", func(context.Context, *drover.Job, struct{}) (any, error) { return nil, nil })
	if err := w.Start(ctx); err != nil {
		t.Fatalf("Start with a handler: %v", err)
	}
	defer func() { _ = w.Stop(ctx) }()
	waitStatus(t, c, id, drover.StatusSucceeded)
}

// A kind's negative WithTimeout means none for its jobs, over the worker's
// DefaultTimeout; its 0 leaves the default. A job's own timeout wins over both.
func TestWorkerKindTimeoutNegativeMeansNone(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		type seen struct {
			kind        string
			hasDeadline bool
			left        time.Duration
		}
		seenCh := make(chan seen, 3)
		ws := drover.NewWorkers()
		handler := func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			d, ok := ctx.Deadline()
			seenCh <- seen{job.Kind, ok, time.Until(d)}
			return nil, nil
		}
		drover.Register(ws, "untimed", handler, drover.WithTimeout(-1))
		drover.Register(ws, "defaulted", handler, drover.WithTimeout(0))
		drover.Register(ws, "own", handler, drover.WithTimeout(-1))
		cfg := fastWorkerConfig(ws)
		cfg.DefaultTimeout = time.Hour
		enqueue(t, c, "untimed", nil, nil)
		enqueue(t, c, "defaulted", nil, nil)
		enqueue(t, c, "own", nil, &drover.EnqueueOpts{Timeout: 2 * time.Hour})
		startWorker(t, c, cfg)
		got := map[string]seen{}
		for range 3 {
			select {
			case s := <-seenCh:
				got[s.kind] = s
			case <-time.After(30 * time.Second):
				t.Fatalf("handlers seen after 30s: %v, want 3", got)
			}
		}
		if s := got["untimed"]; s.hasDeadline {
			t.Errorf("kind with WithTimeout(-1): its handler's context ends in %s, want no deadline (DefaultTimeout 1h)", s.left)
		}
		if s := got["defaulted"]; !s.hasDeadline || s.left > time.Hour || s.left < 50*time.Minute {
			t.Errorf("kind with WithTimeout(0): deadline %v in %s, want DefaultTimeout's hour", s.hasDeadline, s.left)
		}
		if s := got["own"]; !s.hasDeadline || s.left > 2*time.Hour || s.left < 110*time.Minute {
			t.Errorf("job with its own 2h timeout, kind WithTimeout(-1): deadline %v in %s, want its own 2h", s.hasDeadline, s.left)
		}
	})
}
