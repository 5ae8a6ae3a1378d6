package drover_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/drover-dev/drover"
)

// recordLog sends the attributes of each record whose message is msg on got.
type recordLog struct {
	msg   string
	attrs []slog.Attr
	got   chan map[string]string
}

func (h *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordLog) WithAttrs(a []slog.Attr) slog.Handler {
	return &recordLog{h.msg, append(h.attrs[:len(h.attrs):len(h.attrs)], a...), h.got}
}
func (h *recordLog) WithGroup(string) slog.Handler { return h }
func (h *recordLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != h.msg {
		return nil
	}
	m := map[string]string{"level": r.Level.String()}
	for _, a := range h.attrs {
		m[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	select {
	case h.got <- m:
	default:
	}
	return nil
}

// A heartbeat that failed is logged with the job, its kind and the attempt
// it was for, as every other line about one execution is: it named the job
// alone, and an operator could not tell which run of it was in trouble.
func TestHeartbeatFailureLogNamesTheAttempt(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		base := newClient(t, kind, nil)
		hb := &failingHeartbeats{Driver: base.Driver(), firstOK: make(chan struct{})}
		c, err := drover.NewClient(hb, nil)
		if err != nil {
			t.Fatal(err)
		}
		ws := drover.NewWorkers()
		drover.Register(ws, "beat", func(ctx context.Context, _ *drover.Job, _ struct{}) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		log := &recordLog{msg: "heartbeat failed", got: make(chan map[string]string, 16)}
		cfg := fastWorkerConfig(ws)
		cfg.Logger = slog.New(log)
		startWorker(t, c, cfg)
		id := enqueue(t, base, "beat", nil, nil).ID
		got := waitChan(t, log.got, "a failed heartbeat's log line")
		want := map[string]string{"level": "WARN", "job": strconv.FormatInt(id, 10), "kind": "beat", "attempt": "1"}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("heartbeat failed: %s = %q, want %q (line %v)", k, got[k], v, got)
			}
		}
	})
}
