package wakeup

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/testdb"
)

const wait = 10 * time.Second

func TestNATSDeliversOnlySubscribedQueues(t *testing.T) {
	t.Parallel()
	n := newTestNATS(t, NATSOptions{})
	// "a.b" and "a_b" would share a subject under a naive '.'→'_' encoding, and
	// "a.b" must not become a two-level subject that "a.>" style filters could catch.
	dotted, err := n.Subscribe(t.Context(), []string{"a.b"})
	if err != nil {
		t.Fatal(err)
	}
	underscored, err := n.Subscribe(t.Context(), []string{"a_b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Publish(t.Context(), []Pointer{{"a_b", 8}, {"other", 9}, {"a.b", 7}}); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, dotted, wait); m.Pointer != (Pointer{"a.b", 7}) {
		t.Fatalf("a.b subscriber got %+v, want {a.b 7}", m.Pointer)
	}
	if m := recv(t, underscored, wait); m.Pointer != (Pointer{"a_b", 8}) {
		t.Fatalf("a_b subscriber got %+v, want {a_b 8}", m.Pointer)
	}
	// A consumer delivers in stream order: if anything but the sentinel came next,
	// a pointer of another queue would have leaked into this subscription.
	if err := n.Publish(t.Context(), []Pointer{{"a.b", 100}}); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, dotted, wait); m.Pointer != (Pointer{"a.b", 100}) {
		t.Fatalf("a.b subscriber got %+v, want the sentinel {a.b 100}", m.Pointer)
	}
}

func TestNATSSubscribeMultipleQueues(t *testing.T) {
	t.Parallel()
	n := newTestNATS(t, NATSOptions{})
	ch, err := n.Subscribe(t.Context(), []string{"x", "y"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Publish(t.Context(), []Pointer{{"x", 1}, {"z", 3}, {"y", 2}}); err != nil {
		t.Fatal(err)
	}
	got := map[Pointer]bool{}
	for range 2 {
		m := recv(t, ch, wait)
		got[m.Pointer] = true
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if !got[Pointer{"x", 1}] || !got[Pointer{"y", 2}] {
		t.Fatalf("got %v, want {x 1} and {y 2}", got)
	}
}

func TestNATSSubscribersShareAQueue(t *testing.T) {
	t.Parallel()
	url := testdb.NATSURL(t)
	opts := isolate(t, url, NATSOptions{})
	// Two transports, as two worker processes would have.
	a, b := openNATS(t, url, opts), openNATS(t, url, opts)
	const n = 60
	var (
		mu   sync.Mutex
		seen = map[int64]int{}
		by   = map[string]int{}
		all  = make(chan struct{})
	)
	for name, tr := range map[string]*NATS{"a": a, "b": b} {
		ch, err := tr.Subscribe(t.Context(), []string{"shared"})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for m := range ch {
				mu.Lock()
				seen[m.JobID]++
				by[name]++
				if len(seen) == n {
					close(all)
				}
				mu.Unlock()
				_ = m.Ack()
			}
		}()
	}
	ps := make([]Pointer, n)
	for i := range ps {
		ps[i] = Pointer{"shared", int64(i + 1)}
	}
	if err := a.Publish(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(wait):
		mu.Lock()
		t.Fatalf("after %s only %d of %d pointers arrived", wait, len(seen), n)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, c := range seen {
		if c != 1 {
			t.Errorf("pointer to job %d delivered %d times, want once", id, c)
		}
	}
	if by["a"] == 0 || by["b"] == 0 {
		t.Errorf("deliveries per subscriber %v: want both to share the work", by)
	}
}

func TestNATSRedeliversUnacked(t *testing.T) {
	t.Parallel()
	var dropped atomic.Int32
	n := newTestNATS(t, NATSOptions{
		AckWait: time.Second,
		DropAck: func(Message) bool { return dropped.Add(1) == 1 }, // lose the first ack only
	})
	ch, err := n.Subscribe(t.Context(), []string{"q"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Publish(t.Context(), []Pointer{{"q", 42}}); err != nil {
		t.Fatal(err)
	}
	first := recv(t, ch, wait)
	if err := first.Ack(); err != nil { // dropped by the hook
		t.Fatal(err)
	}
	again := recv(t, ch, wait)
	if again.Pointer != first.Pointer {
		t.Fatalf("redelivered %+v, want %+v", again.Pointer, first.Pointer)
	}
	if err := again.Ack(); err != nil {
		t.Fatal(err)
	}
	if err := n.Publish(t.Context(), []Pointer{{"q", 43}}); err != nil {
		t.Fatal(err)
	}
	// Acked for real now, so the next delivery is the new pointer, not a third copy.
	if m := recv(t, ch, wait); m.JobID != 43 {
		t.Fatalf("after the ack got job %d, want 43", m.JobID)
	}
}

func TestNATSFaultHooks(t *testing.T) {
	t.Parallel()
	n := newTestNATS(t, NATSOptions{
		DropPublish:      func(p Pointer) bool { return p.JobID == 1 },
		DuplicatePublish: func(p Pointer) bool { return p.JobID == 2 },
	})
	if err := n.Publish(t.Context(), []Pointer{{"q", 1}, {"q", 2}, {"q", 3}}); err != nil {
		t.Fatal(err)
	}
	// Publish returns once the server stored every message, so the count is exact.
	if got := streamMsgs(t, n); got != 3 {
		t.Fatalf("stream holds %d pointers, want 3 (job 1 dropped, job 2 twice, job 3)", got)
	}
	ch, err := n.Subscribe(t.Context(), []string{"q"})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for range 3 {
		m := recv(t, ch, wait)
		got = append(got, m.JobID)
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if want := []int64{2, 2, 3}; !equal(got, want) {
		t.Fatalf("delivered jobs %v, want %v", got, want)
	}
}

func TestNATSRejectsInvalidQueue(t *testing.T) {
	t.Parallel()
	n := newTestNATS(t, NATSOptions{})
	for _, q := range []string{"", "a b", "a*", "a>"} {
		if err := n.Publish(t.Context(), []Pointer{{q, 1}}); err == nil {
			t.Errorf("Publish to queue %q: no error, want one", q)
		}
		if _, err := n.Subscribe(t.Context(), []string{q}); err == nil {
			t.Errorf("Subscribe to queue %q: no error, want one", q)
		}
	}
}

func TestNATSCloseEndsSubscriptions(t *testing.T) {
	t.Parallel()
	url := testdb.NATSURL(t)
	n := openNATS(t, url, isolate(t, url, NATSOptions{}))
	ch, err := n.Subscribe(t.Context(), []string{"q"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ch)
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
