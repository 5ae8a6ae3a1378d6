package drover_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/drover-dev/drover"
)

// A lease or period far too short (a 1 meant as a second is a nanosecond) is
// refused by Run at once, naming it: at LeaderTTL 1ns an engine campaigned
// tens of thousands of times a second and never trusted its lease long
// enough to reap, and a 1ns ReapInterval reaped in a loop. A Retention
// below MinRetention (a unit slip) deleted every job as it finished. Negative
// values still take the defaults (a negative Retention keeps jobs for ever),
// and the shortest accepted values run.
func TestEngineRefusesTimingsTooShort(t *testing.T) {
	refused := []struct {
		cfg   drover.EngineConfig
		field string
	}{
		{drover.EngineConfig{LeaderTTL: 1}, "leader_ttl"},
		{drover.EngineConfig{LeaderTTL: 99 * time.Millisecond}, "leader_ttl"},
		{drover.EngineConfig{ReapInterval: 1}, "reap_interval"},
		{drover.EngineConfig{ReconcileInterval: 9 * time.Millisecond}, "reconcile_interval"},
		{drover.EngineConfig{Retention: 7}, "retention"},
		{drover.EngineConfig{Retention: 604800000}, "retention"},
	}
	accepted := []drover.EngineConfig{
		{LeaderTTL: -1, ReapInterval: -1, ReconcileInterval: -1, Retention: -1},
		{LeaderTTL: 100 * time.Millisecond, ReapInterval: 10 * time.Millisecond, ReconcileInterval: 10 * time.Millisecond, Retention: drover.MinRetention},
	}
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		for _, tc := range refused {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := drover.NewEngine(c, &tc.cfg).Run(ctx)
			cancel()
			var ve *drover.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field {
				t.Errorf("Run of an engine with %+v: %v, want a ValidationError on %s at once", tc.cfg, err, tc.field)
			}
		}
		for _, cfg := range accepted {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			err := drover.NewEngine(c, &cfg).Run(ctx)
			cancel()
			if err != nil {
				t.Errorf("Run of an engine with %+v: %v, want it to run until its context ends", cfg, err)
			}
		}
	})
}

// A second Run of an engine whose first has not returned fails at once: it
// campaigned under the same ID, so both led and OnLeader(true) came twice (a
// leader-only job started twice), and the first to return resigned the lease
// the other still acted on. Once Run has returned, the engine runs again.
func TestEngineRunsOnceAtATime(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		hooks := make(chan bool, 10)
		e := drover.NewEngine(c, &drover.EngineConfig{LeaderTTL: time.Second, OnLeader: func(leading bool) { hooks <- leading }})
		run := func() (cancel func() error) {
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx) }()
			if !waitChan(t, hooks, "OnLeader(true)") {
				t.Fatal("OnLeader(false) before OnLeader(true)")
			}
			return func() error { stop(); return waitChan(t, done, "Run to return") }
		}
		stop := run()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := e.Run(ctx)
		cancel()
		if err == nil {
			t.Errorf("a second Run while the first runs: nil after its context ended, want an error at once")
		}
		if err := stop(); err != nil {
			t.Fatalf("first Run: %v", err)
		}
		var got []bool
		for len(hooks) > 0 {
			got = append(got, <-hooks)
		}
		if len(got) != 1 || got[0] {
			t.Errorf("OnLeader calls after the first Run's OnLeader(true): %v, want [false]", got)
		}
		// The engine runs again once its Run has returned.
		if err := run()(); err != nil {
			t.Errorf("Run after Run returned: %v", err)
		}
	})
}
