package drover_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// electionCounter is a real driver that counts the elections it answered
// false, so a test knows a candidate campaigned without sleeping for it.
type electionCounter struct {
	driver.Driver
	refused chan struct{}
}

func (d *electionCounter) LeaderAttemptElect(ctx context.Context, p driver.LeaderParams) (bool, error) {
	lead, err := d.Driver.LeaderAttemptElect(ctx, p)
	if err == nil && !lead {
		select {
		case d.refused <- struct{}{}:
		default:
		}
	}
	return lead, err
}

// Two engines given one ID (a hostname, or a copied config), each with its
// own connection to one database as two processes have, never lead at once:
// the lease row holds a token of the Run that took it, so the second engine
// can neither extend nor resign the first one's lease, and leads once the
// first resigns. The election extended a lease held under the same id, so
// both led: two reapers, two schedulers, two OnLeader(true).
func TestEnginesSharingAnIDNeverLeadAtOnce(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		url := testdb.URL(t, kind)
		var mu sync.Mutex
		leading, most := 0, 0
		hooks := [2]chan bool{make(chan bool, 10), make(chan bool, 10)}
		drvs := [2]*electionCounter{}
		engines := [2]*drover.Engine{}
		for i := range engines {
			drvs[i] = &electionCounter{Driver: testdb.OpenURL(t, kind, url), refused: make(chan struct{}, 1)}
			c, err := drover.NewClient(drvs[i], nil)
			if err != nil {
				t.Fatal(err)
			}
			engines[i] = drover.NewEngine(c, &drover.EngineConfig{ID: "host-1", LeaderTTL: time.Second, OnLeader: func(lead bool) {
				mu.Lock()
				if lead {
					leading++
				} else {
					leading--
				}
				most = max(most, leading)
				mu.Unlock()
				hooks[i] <- lead
			}})
		}
		run := func(i int) (stop func()) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- engines[i].Run(ctx) }()
			stopped := false
			stop = func() {
				if !stopped {
					stopped = true
					cancel()
					if err := waitChan(t, done, "Run to return"); err != nil {
						t.Errorf("engine %d: Run: %v", i, err)
					}
				}
			}
			t.Cleanup(stop)
			return stop
		}
		stop0 := run(0)
		if !waitChan(t, hooks[0], "engine 0's OnLeader(true)") {
			t.Fatal("engine 0: OnLeader(false) before OnLeader(true)")
		}
		run(1)
		// Engine 1 campaigns (every TTL/10) and is refused, three times.
		for n := 0; n < 3; {
			select {
			case <-drvs[1].refused:
				n++
			case lead := <-hooks[1]:
				t.Fatalf("engine 1: OnLeader(%v) while engine 0, of the same ID, leads (engines leading at once: %d)", lead, func() int { mu.Lock(); defer mu.Unlock(); return leading }())
			case <-time.After(waitTimeout):
				t.Fatalf("timed out after %s waiting for engine 1's elections to be refused", waitTimeout)
			}
		}
		if engines[1].IsLeader() {
			t.Errorf("engine 1 leads while engine 0 (same ID) leads")
		}
		if !engines[0].IsLeader() {
			t.Errorf("engine 0 stopped leading while it ran")
		}
		// Engine 0 resigns on the way out: the lease is free, engine 1 takes it.
		stop0()
		if got := waitChan(t, hooks[0], "engine 0's OnLeader(false)"); got {
			t.Fatal("engine 0: OnLeader(true) twice")
		}
		if !waitChan(t, hooks[1], "engine 1's OnLeader(true) once engine 0 resigned") {
			t.Fatal("engine 1: OnLeader(false) before OnLeader(true)")
		}
		if !engines[1].IsLeader() {
			t.Errorf("engine 1 does not lead after engine 0 resigned")
		}
		mu.Lock()
		defer mu.Unlock()
		if most != 1 {
			t.Errorf("at most %d engines with one ID led at once, want 1", most)
		}
	})
}
