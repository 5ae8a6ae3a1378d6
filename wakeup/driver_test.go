package wakeup

import (
	"testing"

	"github.com/drover-dev/drover/internal/testdb"
)

func TestFromDriver(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			d := testdb.Open(t, kind)
			tr := FromDriver(d)
			t.Cleanup(func() { _ = tr.Close() })
			ch, err := tr.Subscribe(t.Context(), []string{"a", "b"})
			if err != nil {
				t.Fatal(err)
			}

			// Job ids are dropped: the driver's wake-ups are queue-level.
			if err := tr.Publish(t.Context(), []Pointer{{"c", 1}, {"a", 2}, {"a", 3}}); err != nil {
				t.Fatal(err)
			}
			m := recv(t, ch, wait)
			if m.Pointer != (Pointer{Queue: "a"}) {
				t.Fatalf("got %+v, want {a 0}: c is not subscribed and ids are dropped", m.Pointer)
			}
			if err := m.Ack(); err != nil {
				t.Fatalf("Ack: %v, want a no-op", err)
			}

			// "" is the driver's "any queue": every subscribed queue hears it.
			if err := d.WakeupPublish(t.Context(), []string{""}); err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for range 2 {
				got[recv(t, ch, wait).Queue] = true
			}
			if !got["a"] || !got["b"] {
				t.Fatalf("after a wake-up for all queues got %v, want a and b", got)
			}

			// Close ends the subscription but leaves the caller's driver open.
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, ch)
			if err := d.Ping(t.Context()); err != nil {
				t.Fatalf("driver unusable after the transport closed: %v", err)
			}
		})
	}
}
