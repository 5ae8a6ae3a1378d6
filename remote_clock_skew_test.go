package drover_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/server"
)

// shiftTimes moves every RFC 3339 time string in v by d, in place.
func shiftTimes(v any, d time.Duration) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = shiftTimes(e, d)
		}
	case []any:
		for i, e := range x {
			x[i] = shiftTimes(e, d)
		}
	case string:
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil && len(x) >= 20 {
			return t.Add(d).Format(time.RFC3339Nano)
		}
	}
	return v
}

// skewProxy forwards to target and rewrites every time in every JSON answer
// as a server whose clock (and database's) ran d off the worker's would
// write it, as the worker reads it: lease_expires_at, run_at, created_at…
// It also counts heartbeats and remembers the longest gap between two.
type skewProxy struct {
	d      atomic.Int64
	target string

	mu       sync.Mutex
	lastHB   map[int64]time.Time
	maxGap   time.Duration
	hbCount  atomic.Int64
	hbFailed atomic.Int64
}

func (p *skewProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path == "/internal/heartbeat" {
		var f struct {
			TaskID int64 `json:"task_id"`
		}
		_ = json.Unmarshal(body, &f)
		now := time.Now()
		p.mu.Lock()
		if last, ok := p.lastHB[f.TaskID]; ok && now.Sub(last) > p.maxGap {
			p.maxGap = now.Sub(last)
		}
		p.lastHB[f.TaskID] = now
		p.mu.Unlock()
		p.hbCount.Add(1)
	}
	a, ok := relay(w, r, p.target, body)
	if !ok {
		return
	}
	if r.URL.Path == "/internal/heartbeat" && a.status != 200 && !bytes.Equal(bytes.TrimSpace(body), []byte("{}")) {
		p.hbFailed.Add(1)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.UseNumber()
	if dec.Decode(&v) == nil {
		v = shiftTimes(v, time.Duration(p.d.Load()))
		a.body, _ = json.Marshal(v)
	}
	a.write(w)
}

// A remote worker whose clock is hours off the server's (seen from the worker:
// every absolute time the server answers is hours off its own clock, ahead or
// behind, or jumps by hours mid-job as an NTP step would make it look) still
// heartbeats in time, by the lease's length: a job that runs for several
// leases is never reaped under it, and it completes; a snooze it asks for
// means the delay on the database's clock. (Audit by helper-86: it held.)
func TestRemoteWorkerWithASkewedClock(t *testing.T) {
	for _, skew := range []time.Duration{5 * time.Hour, -5 * time.Hour, 0 /* jumps mid-job */} {
		t.Run(skew.String(), func(t *testing.T) {
			forEachKind(t, func(t *testing.T, kind string) {
				const lease = 1 * time.Second
				ts := startServer(t, kind, server.Config{LeaseDuration: lease})
				c := ts.c
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				eng := drover.NewEngine(c, &drover.EngineConfig{ReapInterval: 20 * time.Millisecond, LeaderTTL: time.Second})
				go eng.Run(ctx)

				p := &skewProxy{target: ts.url, lastHB: map[int64]time.Time{}}
				p.d.Store(int64(skew))
				ps := httptest.NewServer(p)
				t.Cleanup(ps.Close)

				var running atomic.Int32
				var overlap atomic.Bool
				var ranCancel atomic.Int32
				ws := drover.NewWorkers()
				drover.Register(ws, "long", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
					if running.Add(1) > 1 {
						overlap.Store(true)
					}
					defer running.Add(-1)
					// Four leases, with the worker's view of the server clock
					// jumping by hours in the middle when skew is 0.
					for i := 0; i < 40; i++ {
						if skew == 0 && i == 10 {
							p.d.Store(int64(7 * time.Hour))
						}
						if skew == 0 && i == 25 {
							p.d.Store(int64(-7 * time.Hour))
						}
						select {
						case <-ctx.Done():
							ranCancel.Add(1)
							return nil, ctx.Err()
						case <-time.After(100 * time.Millisecond):
						}
					}
					return "done", nil
				})
				drover.Register(ws, "snoozer", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
					if job.Attempt == 1 {
						return nil, drover.Snooze(90 * time.Second)
					}
					return "ok", nil
				})
				cfg := &drover.WorkerConfig{ID: "skewed", Workers: ws, LeaseDuration: 30 * time.Second,
					PollInterval: 50 * time.Millisecond, TimeoutGrace: 200 * time.Millisecond}
				startRemoteWorker(t, drover.RemoteConfig{URL: ps.URL, WaitSeconds: 1}, cfg)

				id := enqueue(t, c, "long", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
				j := waitStatus(t, c, id, drover.StatusSucceeded, drover.StatusFailed)
				if j.Status != drover.StatusSucceeded || j.Attempt != 1 {
					t.Errorf("long job under skew %s: %s (errors %+v), want succeeded at attempt 1", skew, describe(j), j.Errors)
				}
				if overlap.Load() || ranCancel.Load() > 0 {
					t.Errorf("overlap %v, handler canceled %d times", overlap.Load(), ranCancel.Load())
				}
				p.mu.Lock()
				gap := p.maxGap
				p.mu.Unlock()
				if gap >= lease {
					t.Errorf("longest gap between heartbeats %s, at or past the server's lease %s", gap, lease)
				}
				if p.hbCount.Load() < 3 || p.hbFailed.Load() > 0 {
					t.Errorf("heartbeats: %d sent, %d refused; want at least 3, none refused", p.hbCount.Load(), p.hbFailed.Load())
				}

				sid := enqueue(t, c, "snoozer", nil, nil).ID
				sj := waitJob(t, c, sid, "snoozed", func(j *drover.Job) bool {
					return j.Status == drover.StatusQueued && j.RunAt.After(time.Now().Add(time.Minute))
				})
				evs, err := c.Events(context.Background(), sid)
				if err != nil {
					t.Fatal(err)
				}
				var at time.Time
				for _, e := range evs {
					if string(e.Type) == "snoozed" {
						at = e.At
					}
				}
				if at.IsZero() {
					t.Fatalf("no snoozed event in %+v", evs)
				}
				if d := sj.RunAt.Sub(at); d < 90*time.Second-time.Millisecond || d > 90*time.Second+time.Second {
					t.Errorf("snooze of 90s: run_at %s is %s after the snooze (%s), want 90s on the database clock", sj.RunAt, d, at)
				}
			})
		})
	}
}
