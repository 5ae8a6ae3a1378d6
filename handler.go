package drover

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/drover-dev/drover/driver"
)

// HandlerFunc handles one job of a kind, receiving its args decoded into T. The
// result (any JSON-encodable value, or nil) is stored on the job. Return
// Permanent(err) to fail without retrying, or Snooze(d) to run again later.
type HandlerFunc[T any] func(ctx context.Context, job *Job, args T) (any, error)

// Workers is the registry of handlers by kind. Register handlers before starting a
// Worker with it.
type Workers struct {
	mu    sync.RWMutex
	kinds map[string]*kindHandler
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
func WithTimeout(d time.Duration) KindOption { return func(h *kindHandler) { h.timeout = d } }

// NewWorkers returns an empty registry.
func NewWorkers() *Workers { return &Workers{kinds: map[string]*kindHandler{}} }

// Register adds the handler of kind. It panics on an invalid or duplicate kind,
// which is a programming error found at start-up.
func Register[T any](w *Workers, kind string, fn HandlerFunc[T], opts ...KindOption) {
	if err := driver.ValidateName("kind", kind); err != nil {
		panic(fmt.Sprintf("drover.Register: %v", err))
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
