package drover_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/wakeup"
)

// feedTransport is a wake-up transport whose one subscription delivers what
// the test sends on feed.
type feedTransport struct{ feed chan wakeup.Message }

func (feedTransport) Publish(context.Context, []wakeup.Pointer) error { return nil }
func (t feedTransport) Subscribe(ctx context.Context, _ []string) (<-chan wakeup.Message, error) {
	out := make(chan wakeup.Message)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-t.feed:
				select {
				case out <- m:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
func (feedTransport) Close() error { return nil }

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A worker keeps at most maxPendingPointers (1,000) transport pointers of a
// queue unacknowledged; beyond that it acks a pointer at once. A claim that
// failed put the pointers it had taken back in front of those that came while
// it ran, past the bound: while claims kept failing (a server down, a token
// refused, a database refusing claims) and the transport kept delivering, the
// worker held every pointer delivered during a claim, for good, growing by up
// to a thousand each failed claim.
func TestFailedClaimsKeepPendingPointersBounded(t *testing.T) {
	const perClaim, rounds = 1000, 300
	claimed, answer, quit := make(chan struct{}), make(chan struct{}), make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/internal/task-claim" {
			http.Error(w, "unexpected", http.StatusNotFound)
			return
		}
		select {
		case claimed <- struct{}{}:
			select {
			case <-answer:
			case <-quit:
			case <-r.Context().Done():
				return
			}
		case <-quit:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"invalid token"}}`))
	}))
	defer hs.Close()

	tr := feedTransport{feed: make(chan wakeup.Message)}
	ws := drover.NewWorkers()
	drover.Register(ws, "k", func(context.Context, *drover.Job, struct{}) (any, error) { return nil, nil })
	cfg := fastWorkerConfig(ws)
	cfg.Queues = map[string]int{"q": 1}
	cfg.PollInterval = time.Hour // claims follow the pointers only
	cfg.Wakeups = tr
	w, err := drover.NewRemoteWorker(drover.RemoteConfig{URL: hs.URL, WaitSeconds: -1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(quit)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Stop: %v", err)
		}
	}()

	// Each round: while a claim is under way, perClaim pointers of the
	// queue arrive (and one of another queue, which the worker acks at once:
	// once it is taken, the last of the queue's has been kept), then the
	// claim fails.
	round := func() {
		select {
		case <-claimed:
		case <-time.After(waitTimeout):
			t.Fatal("no claim came")
		}
		for i := range perClaim + 1 {
			m := wakeup.Message{Pointer: wakeup.Pointer{Queue: "q", JobID: int64(i + 1)}}
			if i == perClaim {
				m.Queue = "elsewhere"
			}
			tr.feed <- m
		}
		answer <- struct{}{}
	}
	for range 3 {
		round()
	}
	base := heapInUse()
	for range rounds {
		round()
	}
	// One more claim has begun: the last round's pointers are settled.
	select {
	case <-claimed:
	case <-time.After(waitTimeout):
		t.Fatal("no claim came")
	}
	grown := int64(heapInUse()) - int64(base)
	// A pointer held costs 32 bytes (more in a grown slice): the rounds'
	// 300,000 held, over 9 MB; at the bound, a few tens of kB.
	if grown > 2<<20 {
		t.Errorf("after %d failed claims that each saw %d pointers arrive, the heap grew by %.1f MB: the worker holds pointers past its bound of 1000 a queue",
			rounds, perClaim, float64(grown)/(1<<20))
	}
}
