package drover_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/wakeup"
)

// nilPtrErr has a pointer receiver, as error types often do: a handler that
// returns a typed nil *nilPtrErr returns a non-nil error whose Error panics.
type nilPtrErr struct{ msg string }

func (e *nilPtrErr) Error() string { return e.msg }

// panickyResult's MarshalJSON panics (json.Marshal passes the panic on).
type panickyResult struct{ inner *struct{ V int } }

func (r panickyResult) MarshalJSON() ([]byte, error) { return []byte{byte('0' + r.inner.V)}, nil }

// wrapErr is the usual shape of a wrapping error (like fs.PathError): pointer
// receivers whose Error and Unwrap read its fields.
type wrapErr struct{ err error }

func (e *wrapErr) Error() string { return "query: " + e.err.Error() }
func (e *wrapErr) Unwrap() error { return e.err }

// A typed nil error returned after the handler's context ended (a timeout, a
// failed heartbeat, a hard stop) is wrapped with the cause first, and fmt
// swallows the panic of its Error: errors.As then walked into its Unwrap
// outside any recover and ended the process (helper-40's R40-3). It fails
// its job instead.
func TestTypedNilErrorAfterATimeoutEndsOnlyTheJob(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "path", func(ctx context.Context, _ *drover.Job, _ struct{}) (any, error) {
			<-ctx.Done()
			var e *fs.PathError
			return nil, e
		})
		drover.Register(ws, "wrap", func(ctx context.Context, _ *drover.Job, _ struct{}) (any, error) {
			<-ctx.Done()
			var e *wrapErr
			return nil, e
		})
		startWorker(t, c, fastWorkerConfig(ws))
		for _, kind := range []string{"path", "wrap"} {
			id := enqueue(t, c, kind, nil, &drover.EnqueueOpts{MaxAttempts: 1, Timeout: 50 * time.Millisecond}).ID
			if j := waitStatus(t, c, id, drover.StatusFailed); !strings.Contains(j.Error, "panicked when read") {
				t.Errorf("%s: %s; want failed, saying its error panicked when read", kind, describe(j))
			}
		}
	})
}

// What a handler hands back is read outside the handler's own recover: an
// error whose Error method panics, a result whose encoding panics, and a
// backoff function that panics each ended the worker's process, with every
// job it held, and again each time the job ran (helper-39). They end their
// job instead, and the worker runs on.
func TestUserCodePanicsAfterTheHandlerEndOnlyTheJob(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "nil-error", func(context.Context, *drover.Job, struct{}) (any, error) {
			var e *nilPtrErr // "no error", from a helper that returns *nilPtrErr
			return nil, e
		})
		drover.Register(ws, "bad-result", func(context.Context, *drover.Job, struct{}) (any, error) {
			return panickyResult{}, nil
		})
		drover.Register(ws, "bad-backoff", func(context.Context, *drover.Job, struct{}) (any, error) {
			return nil, errors.New("boom")
		}, drover.WithBackoff(func(int) time.Duration { panic("a bug in the backoff") }))
		startWorker(t, c, fastWorkerConfig(ws))
		for _, tc := range []struct{ kind, err string }{
			{"nil-error", "panicked when read"},
			{"bad-result", "encoding panicked"}, // permanent, as any result that cannot be encoded
			{"bad-backoff", ""},                 // retried, after DefaultBackoff's delay
		} {
			opts := &drover.EnqueueOpts{MaxAttempts: 1}
			if tc.kind == "bad-backoff" {
				opts.MaxAttempts = 2
			}
			id := enqueue(t, c, tc.kind, nil, opts).ID
			if tc.kind == "bad-backoff" {
				// DefaultBackoff draws attempt 1's delay from [0, 1s] (full
				// jitter), so the retry may already have run, and failed its
				// last attempt, when the job is first seen: a delay of a few
				// milliseconds did that in CI. Either way the first failure was
				// retried, not final; seen before the retry ran, its run_at is
				// within DefaultBackoff's ceiling of that failure.
				j := waitJob(t, c, id, "retried", func(j *drover.Job) bool {
					return j.Status == drover.StatusQueued && j.Executions == 1 || j.Status == drover.StatusFailed
				})
				switch {
				case j.Status == drover.StatusFailed:
					if j.Executions != 2 || len(j.Errors) != 2 {
						t.Errorf("%s: %s; want its first failure retried", tc.kind, describe(j))
					}
				case len(j.Errors) != 1:
					t.Errorf("%s: %s; want one error recorded", tc.kind, describe(j))
				case j.RunAt.Before(j.Errors[0].At) || j.RunAt.After(j.Errors[0].At.Add(time.Second)):
					t.Errorf("%s: failed at %s, retried at %s; want DefaultBackoff's delay, at most 1s", tc.kind, j.Errors[0].At, j.RunAt)
				}
				continue
			}
			j := waitStatus(t, c, id, drover.StatusFailed)
			if !strings.Contains(j.Error, tc.err) || j.Executions != 1 {
				t.Errorf("%s: %s; want failed with %q", tc.kind, describe(j), tc.err)
			}
		}
	})
}

// A result json.Marshal encodes but the database cannot store (nesting deeper
// than json.Valid's 10,000 levels) fails its job at once, saying why: the
// refusal was retried for a whole lease, the job left running, and then run
// again (helper-39).
func TestUnstorableResultFailsItsJob(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		var runs atomic.Int32
		drover.Register(ws, "deep", func(context.Context, *drover.Job, struct{}) (any, error) {
			runs.Add(1)
			var v any = []any{}
			for range 20000 {
				v = []any{v}
			}
			return v, nil
		})
		startWorker(t, c, fastWorkerConfig(ws))
		id := enqueue(t, c, "deep", nil, &drover.EnqueueOpts{MaxAttempts: 3}).ID
		j := waitStatus(t, c, id, drover.StatusFailed, drover.StatusSucceeded)
		if j.Status != drover.StatusFailed || !strings.Contains(j.Error, "result") || runs.Load() != 1 {
			t.Errorf("%s, ran %d times; want failed at once, its error about the result", describe(j), runs.Load())
		}
	})
}

// panickyObserver panics in every call, as a metrics hook with a bug might.
type panickyObserver struct{}

func (panickyObserver) Claimed(string, int)                         { panic("observer bug") }
func (panickyObserver) Finished(*drover.Job, string, time.Duration) { panic("observer bug") }
func (panickyObserver) LeaseLost(*drover.Job)                       { panic("observer bug") }

// An Observer is user code called outside any handler's recover: its panic is
// logged, and the worker runs on (helper-40).
func TestPanickingObserverDoesNotEndTheWorker(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		drover.Register(ws, "k", func(context.Context, *drover.Job, struct{}) (any, error) { return "ok", nil })
		cfg := fastWorkerConfig(ws)
		cfg.Observer = panickyObserver{}
		startWorker(t, c, cfg)
		for range 2 {
			waitStatus(t, c, enqueue(t, c, "k", nil, nil).ID, drover.StatusSucceeded)
		}
	})
}

// asAlways's As answers true for every target, setting only its own type's
// (a return true outside its type switch).
type asAlways struct{ msg string }

func (e *asAlways) Error() string { return e.msg }
func (e *asAlways) As(target any) bool {
	if t, ok := target.(**asAlways); ok {
		*t = e
	}
	return true
}

// selfWrap's Unwrap returns itself.
type selfWrap struct{ msg string }

func (e *selfWrap) Error() string { return e.msg }
func (e *selfWrap) Unwrap() error { return e }

// Error values whose methods misbehave end their job, with their own message,
// not the process or the job's goroutine: an As that matches every type left
// the worker reading a nil target; a wrapped nil *PanicError was matched and
// read; an error that wraps itself had errors.Is walk it for ever, and Stop
// wait for it (helper-41), then was replaced by a message of the worker's
// (helper-42).
func TestMisbehavingErrorsEndOnlyTheirJob(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		errs := map[string]func() error{
			"as-always":       func() error { return &asAlways{"card declined"} },
			"nil-panic-error": func() error { var p *drover.PanicError; return fmt.Errorf("charge: %w", p) },
			"self-wrap":       func() error { return &selfWrap{"declined"} },
		}
		for name, mk := range errs {
			drover.Register(ws, name, func(context.Context, *drover.Job, struct{}) (any, error) { return nil, mk() })
		}
		startWorker(t, c, fastWorkerConfig(ws))
		for name, want := range map[string]string{"as-always": "card declined", "nil-panic-error": "charge", "self-wrap": "declined"} {
			id := enqueue(t, c, name, nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
			if j := waitStatus(t, c, id, drover.StatusFailed); !strings.Contains(j.Error, want) {
				t.Errorf("%s: %s; want failed, its error saying %q", name, describe(j), want)
			}
		}
	})
}

// asAlwaysWrap wraps an error under an As that matches every type.
type asAlwaysWrap struct{ inner error }

func (e *asAlwaysWrap) Error() string   { return "charge: " + e.inner.Error() }
func (e *asAlwaysWrap) Unwrap() error   { return e.inner }
func (e *asAlwaysWrap) As(any) bool     { return true }
func (e *asAlwaysWrap) Is(error) bool   { return true }
func (e *asAlwaysWrap) String() string  { return e.Error() }
func (e *asAlwaysWrap) Timeout() bool   { return false }
func (e *asAlwaysWrap) Temporary() bool { return false }

// badMarshal's MarshalJSON fails with a typed nil *wrapErr, whose Unwrap
// panics.
type badMarshal struct{}

func (badMarshal) MarshalJSON() ([]byte, error) { var e *wrapErr; return nil, e }

// The worker finds its own answers (Snooze, Permanent) by walking the error's
// chain itself, as far as 10,000 errors, and consults no Is or As method of
// the user's: a Permanent or Snooze deep in a join was lost past a bound of
// 100, a Snooze below an As that matches every type was not seen, an Is that
// matches every target passed for the worker's own shutdown and retried the
// job at once, and an encoding error whose Unwrap panics ended the process
// (helper-42).
func TestTheWorkersAnswersAreFoundInAnyChain(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ws := drover.NewWorkers()
		join := func(last error) error {
			errs := make([]error, 150)
			for i := range errs {
				errs[i] = fmt.Errorf("step %d failed", i)
			}
			return errors.Join(append(errs, last)...)
		}
		hourly := drover.WithBackoff(func(int) time.Duration { return time.Hour })
		handlers := map[string]func() (any, error){
			"permanent-in-join": func() (any, error) { return nil, drover.Permanent(join(errors.New("declined"))) },
			"snooze-in-join":    func() (any, error) { return nil, join(drover.Snooze(time.Hour)) },
			"snooze-below-as":   func() (any, error) { return nil, &asAlwaysWrap{drover.Snooze(time.Hour)} },
			"is-always":         func() (any, error) { return nil, &asAlwaysWrap{errors.New("declined")} },
			"bad-marshal":       func() (any, error) { return badMarshal{}, nil },
		}
		for name, h := range handlers {
			drover.Register(ws, name, func(context.Context, *drover.Job, struct{}) (any, error) { return h() }, hourly)
		}
		startWorker(t, c, fastWorkerConfig(ws))
		later := time.Now().Add(30 * time.Minute)
		for name, want := range map[string]func(*drover.Job) bool{
			"permanent-in-join": func(j *drover.Job) bool { return j.Status == drover.StatusFailed && j.Executions == 1 },
			"snooze-in-join": func(j *drover.Job) bool {
				return j.Status == drover.StatusQueued && j.Executions == 0 && j.RunAt.After(later)
			},
			"snooze-below-as": func(j *drover.Job) bool {
				return j.Status == drover.StatusQueued && j.Executions == 0 && j.RunAt.After(later)
			},
			"is-always": func(j *drover.Job) bool {
				return j.Status == drover.StatusQueued && j.Executions == 1 && j.RunAt.After(later)
			},
			"bad-marshal": func(j *drover.Job) bool { return j.Status == drover.StatusFailed && j.Executions == 1 },
		} {
			id := enqueue(t, c, name, nil, &drover.EnqueueOpts{MaxAttempts: 3}).ID
			waitJob(t, c, id, name+"'s answer", want)
		}
	})
}

// An EngineConfig.OnLeader that panics is logged, and the engine leads on:
// the panic ended the process, and the one on the way out skipped the
// resignation (helper-42). One that calls runtime.Goexit ended the engine's
// Run, and nothing was reaped (helper-43).
func TestPanickingOnLeaderDoesNotEndTheEngine(t *testing.T) {
	for name, hook := range map[string]func(bool){
		"panic":  func(bool) { panic("hook bug") },
		"goexit": func(bool) { runtime.Goexit() },
	} {
		t.Run(name, func(t *testing.T) { onLeaderHookTest(t, hook) })
	}
}

func onLeaderHookTest(t *testing.T, hook func(bool)) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		id := enqueue(t, c, "k", nil, nil).ID
		claimed, err := c.Driver().JobClaim(context.Background(), driver.ClaimParams{
			Queues: []string{drover.DefaultQueue}, Limit: 1, Owner: "gone", LeaseDuration: 100 * time.Millisecond, Start: true})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v, %v", claimed, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		e := drover.NewEngine(c, &drover.EngineConfig{LeaderTTL: time.Second, ReapInterval: 50 * time.Millisecond, Retention: -1,
			OnLeader: hook})
		go func() { defer close(done); _ = e.Run(ctx) }()
		// The reaper runs only under a leader that survived its hook.
		waitJob(t, c, id, "reaped", func(j *drover.Job) bool { return j.Status == drover.StatusQueued && j.Attempt == 1 })
		cancel()
		<-done
	})
}

// panickyTransport is a wake-up transport whose Publish panics, after telling
// published.
type panickyTransport struct{ published chan struct{} }

func (t panickyTransport) Publish(context.Context, []wakeup.Pointer) error {
	select {
	case t.published <- struct{}{}:
	default:
	}
	panic("transport bug")
}
func (panickyTransport) Subscribe(context.Context, []string) (<-chan wakeup.Message, error) {
	return nil, errors.New("no subscriptions")
}
func (panickyTransport) Close() error { return nil }

// A wake-up transport is user code, and its pointers only hints: a Publish
// that panics neither fails an Enqueue whose job is stored (its caller, told
// nothing was stored, would enqueue it again) nor ends the engine's process.
func TestPanickingTransportDoesNotEndEnqueueOrTheEngine(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		tr := panickyTransport{make(chan struct{}, 1)}
		c := newClient(t, kind, &drover.Config{Wakeups: tr})
		j, err := c.Enqueue(context.Background(), "k", nil, nil)
		if err != nil || j == nil {
			t.Fatalf("Enqueue under a panicking transport = %v, %v; want the job", j, err)
		}
		waitChan(t, tr.published, "the enqueue's publish")
		getJob(t, c, j.Job.ID)

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		e := drover.NewEngine(c, &drover.EngineConfig{LeaderTTL: time.Second, ReconcileInterval: 20 * time.Millisecond, Retention: -1, Wakeups: tr})
		go func() { defer close(done); _ = e.Run(ctx) }()
		// The reconciler publishes the waiting job's queue each pass: a second
		// publish is one the engine lived through.
		for range 2 {
			waitChan(t, tr.published, "the reconciler's publish")
		}
		cancel()
		<-done
	})
}
