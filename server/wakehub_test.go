package server

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// endedSubscriptions answers every wake-up subscription with a channel that is
// already closed, as a closed driver does.
type endedSubscriptions struct {
	driver.Driver
	calls atomic.Int64
}

func (d *endedSubscriptions) WakeupSubscribe(ctx context.Context) (<-chan string, error) {
	d.calls.Add(1)
	ch := make(chan string)
	close(ch)
	return ch, nil
}

// A wake-up subscription that ends at once is not taken again at once: the hub
// subscribed in a hot loop while a long poll waited (a library user closing the
// driver before the server, say).
func TestWakeHubDoesNotSpinOnASubscriptionThatEndsAtOnce(t *testing.T) {
	t.Parallel()
	drv := &endedSubscriptions{Driver: testdb.Open(t, "sqlite")}
	c, err := drover.NewClient(drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(c, Config{})
	t.Cleanup(s.Close)
	// A long poll of a second on an empty queue keeps the hub running.
	status, _, b := call(t, s, http.MethodPost, "/internal/task-claim", "",
		[]byte(`{"worker_id":"w","queues":["q"],"wait_seconds":1}`))
	if status != http.StatusOK {
		t.Fatalf("task-claim = %d %s", status, b)
	}
	if n := drv.calls.Load(); n > 3 {
		t.Errorf("%d wake-up subscriptions during a one-second long poll, want at most a few", n)
	}
}
