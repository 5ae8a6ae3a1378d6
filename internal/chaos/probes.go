package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// probeSet is the bad input of phase 7: requests that must be refused with a
// clear 4xx, and jobs that must end as their retry policy says.
type probeSet struct {
	mu        sync.Mutex
	ids       map[int64]bool
	farFuture map[int64]bool
	expect    map[int64]func(*driver.Job) error // checked after the drain
	sent      int
	failures  []string
}

func (p *probeSet) fail(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures = append(p.failures, fmt.Sprintf(format, a...))
}

func (p *probeSet) track(id int64, farFuture bool, expect func(*driver.Job) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ids == nil {
		p.ids, p.farFuture, p.expect = map[int64]bool{}, map[int64]bool{}, map[int64]func(*driver.Job) error{}
	}
	p.ids[id] = true
	if farFuture {
		p.farFuture[id] = true
	}
	p.expect[id] = expect
}

// apiError is the server's error body.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (h *harness) runProbes(ctx context.Context) error {
	e := &enqueuer{h: h, http: &http.Client{Timeout: 30 * time.Second}}
	if h.probes.ids == nil {
		h.probes.track(0, false, nil)
		delete(h.probes.ids, 0)
		delete(h.probes.expect, 0)
	}
	ackedBefore := h.countLines("", "ok", time.Time{}, time.Now())
	started := time.Now()
	// Ordinary jobs alongside, so "the queue keeps flowing" is measured even if
	// the enqueuer already sent its last job.
	h.enqueueSlow(ctx, e, 50, 5)

	// post sends body, retrying while the server is unreachable or unavailable
	// (it may just have been restarted).
	post := func(body []byte) (int, []byte) {
		h.probes.mu.Lock()
		h.probes.sent++
		h.probes.mu.Unlock()
		var status int
		var resp []byte
		e.retry(ctx, "probe", func() (err error) {
			status, resp, err = e.post(ctx, "/jobs", body)
			if err == nil && status >= 500 {
				err = fmt.Errorf("HTTP %d: %s", status, resp)
			}
			return err
		})
		return status, resp
	}
	rejected := func(name string, body []byte, statuses []int, mention string) {
		status, resp := post(body)
		var ae apiError
		_ = json.Unmarshal(resp, &ae)
		okStatus := false
		for _, s := range statuses {
			okStatus = okStatus || s == status
		}
		switch {
		case !okStatus:
			h.probes.fail("%s: HTTP %d, want %v: %s", name, status, statuses, trim(resp))
		case ae.Error.Code == "" || ae.Error.Message == "":
			h.probes.fail("%s: HTTP %d without an error code and message: %s", name, status, trim(resp))
		case mention != "" && !strings.Contains(ae.Error.Message, mention):
			h.probes.fail("%s: error %q does not name %q", name, ae.Error.Message, mention)
		}
	}
	accepted := func(name string, body map[string]any, farFuture bool, expect func(*driver.Job) error) {
		raw, _ := json.Marshal(body)
		status, resp := post(raw)
		var j struct {
			ID int64 `json:"id"`
		}
		if status != http.StatusCreated || json.Unmarshal(resp, &j) != nil || j.ID == 0 {
			h.probes.fail("%s: HTTP %d, want 201 with a job: %s", name, status, trim(resp))
			return
		}
		h.probes.track(j.ID, farFuture, expect)
	}
	failedWith := func(executions int, mention ...string) func(*driver.Job) error {
		return func(j *driver.Job) error {
			if j.Status != lifecycle.StatusFailed || j.Executions != executions {
				return fmt.Errorf("%s after %d executions, want failed after %d", j.Status, j.Executions, executions)
			}
			for _, m := range mention {
				if strings.Contains(j.Error, m) {
					return nil
				}
			}
			return fmt.Errorf("error %q mentions none of %q", j.Error, mention)
		}
	}

	rejected("invalid JSON", []byte(`{"kind": "chaos.work", "args": {`), []int{400}, "")
	rejected("args not an object", []byte(`{"kind": "chaos.work", "args": [1,2]}`), []int{400}, "args")
	big := strings.Repeat("x", 2<<20)
	rejected("oversized args", []byte(`{"kind":"chaos.work","args":{"pad":"`+big+`"}}`), []int{400, 413}, "")
	rejected("negative priority", []byte(`{"kind":"chaos.work","args":{},"priority":-1}`), []int{400}, "priority")
	rejected("NUL in args", []byte(`{"kind":"chaos.work","args":{"s":"a\u0000b"}}`), []int{400}, "")
	rejected("NUL in kind", []byte(`{"kind":"chaos\u0000work","args":{}}`), []int{400}, "kind")
	rejected("bad run_at", []byte(`{"kind":"chaos.work","args":{},"run_at":"tomorrow"}`), []int{400}, "run_at")
	rejected("zero max_attempts", []byte(`{"kind":"chaos.work","args":{},"max_attempts":0}`), []int{400}, "max_attempts")

	accepted("unknown kind", map[string]any{"kind": KindNoHandler, "args": map[string]any{}, "max_attempts": 2}, false,
		failedWith(2, "no handler"))
	accepted("panicking handler", map[string]any{"kind": KindPanic, "args": map[string]any{}, "max_attempts": 2}, false,
		failedWith(2, "panic"))
	accepted("handler that never returns", map[string]any{"kind": KindHang, "args": map[string]any{}, "max_attempts": 2,
		"timeout_seconds": 1}, false, failedWith(2, "did not return", "timed out"))
	future := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	accepted("far-future run_at", map[string]any{"kind": KindWork, "args": workArgs{Seq: -1, MS: 1}, "run_at": future}, true,
		func(j *driver.Job) error {
			if j.Status != lifecycle.StatusQueued || j.Attempt != 0 {
				return fmt.Errorf("%s with attempt %d, want queued and never claimed", j.Status, j.Attempt)
			}
			return nil
		})

	// 50 concurrent enqueues with one idempotency key: exactly one job.
	key := fmt.Sprintf("chaos-dup-%d", time.Now().UnixNano())
	raw, _ := json.Marshal(map[string]any{"kind": KindWork, "args": workArgs{Seq: -2, MS: 1}, "idempotency_key": key})
	type answer struct {
		status int
		id     int64
	}
	answers := make(chan answer, 50)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, resp := post(raw)
			var j struct {
				ID int64 `json:"id"`
			}
			_ = json.Unmarshal(resp, &j)
			answers <- answer{status, j.ID}
		}()
	}
	wg.Wait()
	close(answers)
	created, ids := 0, map[int64]bool{}
	for a := range answers {
		switch a.status {
		case http.StatusCreated:
			created++
		case http.StatusOK:
		default:
			h.probes.fail("duplicate idempotency key: HTTP %d", a.status)
		}
		ids[a.id] = true
	}
	if created != 1 || len(ids) != 1 {
		h.probes.fail("duplicate idempotency key: %d created, %d distinct jobs, want 1 and 1", created, len(ids))
	}
	for id := range ids {
		if id != 0 {
			h.probes.track(id, false, func(j *driver.Job) error {
				if j.Status != lifecycle.StatusSucceeded {
					return fmt.Errorf("%s, want succeeded", j.Status)
				}
				return nil
			})
		}
	}

	// The queue keeps flowing: workers go on completing ordinary jobs meanwhile.
	if err := pace(ctx, 2*time.Second); err != nil {
		return err
	}
	if n := h.countLines("", "ok", time.Time{}, time.Now()) - ackedBefore; n == 0 {
		h.probes.fail("no job completed during the %s of bad input", time.Since(started).Round(time.Millisecond))
	}
	h.summary.Probes = h.probes.sent
	return nil
}

func trim(b []byte) string {
	s := string(b)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
