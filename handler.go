package drover

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/drover-dev/drover/driver"
)

// HandlerFunc handles one job of a kind, receiving its args decoded into T. The
// result (any JSON-encodable value, or nil) is stored on the job. Return
// Permanent(err) to fail without retrying, or Snooze(d) to run again later.
// ctx ends on the job's timeout, an operator's cancel of it, the worker's hard
// stop or a lease the worker could not renew, and when the handler returns, as
// an HTTP request's does: do not hand it to work the handler leaves running.
type HandlerFunc[T any] func(ctx context.Context, job *Job, args T) (any, error)

// Workers is the registry of handlers by kind. Register handlers before starting a
// Worker with it.
type Workers struct {
	mu    sync.RWMutex
	kinds map[string]*kindHandler
}

// empty reports whether no kind has a handler.
func (r *Workers) empty() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.kinds) == 0
}

type kindHandler struct {
	run     func(ctx context.Context, job *Job) (any, error)
	backoff Backoff
	timeout time.Duration
}

// KindOption tunes how one kind is run.
type KindOption func(*kindHandler)

// WithBackoff overrides the retry backoff of a kind.
func WithBackoff(b Backoff) KindOption { return func(h *kindHandler) { h.backoff = b } }

// WithTimeout sets the default timeout of a kind (a job's own timeout wins).
// 0 leaves the worker's DefaultTimeout; a negative d means none for this
// kind's jobs, whatever DefaultTimeout is (as a negative DefaultTimeout
// means none for every kind).
func WithTimeout(d time.Duration) KindOption { return func(h *kindHandler) { h.timeout = d } }

// NewWorkers returns an empty registry.
func NewWorkers() *Workers { return &Workers{kinds: map[string]*kindHandler{}} }

// Register adds the handler of kind. It panics on what is a programming error
// found at start-up: a nil registry or handler, an invalid or duplicate kind,
// or a T that cannot hold a JSON object (a job's args always are one: use a
// struct, a map, json.RawMessage or a type with its own UnmarshalJSON).
//
// A job whose args do not decode into T (a field of the wrong type) fails
// permanently, straight to the DLQ with the decoding error: every retry would
// fail the same way.
func Register[T any](w *Workers, kind string, fn HandlerFunc[T], opts ...KindOption) {
	if w == nil {
		panic("drover.Register: nil *Workers (make one with drover.NewWorkers)")
	}
	if fn == nil {
		panic(fmt.Sprintf("drover.Register: nil handler for kind %q", kind))
	}
	if err := driver.ValidateName("kind", kind); err != nil {
		panic(fmt.Sprintf("drover.Register: %v", err))
	}
	if t := reflect.TypeFor[T](); !holdsObject(t) {
		panic(fmt.Sprintf("drover.Register: kind %q: args type %v cannot hold a JSON object, which a job's args always are: use a struct or a map", kind, t))
	}
	h := &kindHandler{run: func(ctx context.Context, job *Job) (any, error) {
		var args T
		if err := json.Unmarshal(job.Args, &args); err != nil {
			return nil, Permanent(fmt.Errorf("decode args of kind %q into %T: %w", kind, args, err))
		}
		return fn(ctx, job, args)
	}}
	for _, o := range opts {
		o(h)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.kinds[kind]; dup {
		panic(fmt.Sprintf("drover.Register: kind %q registered twice", kind))
	}
	w.kinds[kind] = h
}

// holdsObject reports whether json.Unmarshal can decode a JSON object into a
// value of type t.
func holdsObject(t reflect.Type) bool {
	unmarshaler := reflect.TypeFor[json.Unmarshaler]()
	for {
		if t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler) {
			return true
		}
		if t.Kind() != reflect.Pointer {
			break
		}
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Interface:
		return t.NumMethod() == 0
	case reflect.Map:
		k := t.Key()
		return k.Kind() == reflect.String || k.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) ||
			reflect.PointerTo(k).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) ||
			(k.Kind() >= reflect.Int && k.Kind() <= reflect.Uintptr)
	}
	return false
}

func (w *Workers) get(kind string) *kindHandler {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.kinds[kind]
}

// Kinds lists the registered kinds, sorted.
func (w *Workers) Kinds() []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]string, 0, len(w.kinds))
	for k := range w.kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
