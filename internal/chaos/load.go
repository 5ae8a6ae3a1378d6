package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/drover-dev/drover"
)

// ledger is the enqueuer's record: every seq it sent, and the job id of every
// enqueue the system acknowledged. An enqueue counts as acknowledged only when the
// call returned success; a failed call is retried with the same idempotency key,
// so an enqueue that committed before its answer was lost is acknowledged by the
// retry instead of becoming a job nobody knows about.
type ledger struct {
	mu        sync.Mutex
	acked     map[int64]int64
	attempted map[int64]bool
	next      int64
	refused   int // enqueues refused as invalid (a bug: the harness sends only valid ones)
}

func (l *ledger) init() {
	l.acked, l.attempted = map[int64]int64{}, map[int64]bool{}
}

func (l *ledger) take() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	l.attempted[l.next] = true
	return l.next
}

func (l *ledger) ack(seq, id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked[seq] = id
}

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func idemKey(seq int64) string { return fmt.Sprintf("chaos-%d", seq) }

// enqueuer sends jobs at the profile's rate until told to hurry, then as fast as
// it can, until jobs are sent or stop closes.
type enqueuer struct {
	h     *harness
	total int
	hurry chan struct{} // closed: no more rate limit
	done  chan struct{} // closed when every sender returned
	http  *http.Client
}

func (h *harness) startEnqueuer(ctx context.Context) *enqueuer {
	h.led.init()
	e := &enqueuer{h: h, total: h.prof.jobs, hurry: make(chan struct{}), done: make(chan struct{}),
		http: &http.Client{Timeout: 10 * time.Second}}
	items := make(chan int, 64)
	var wg sync.WaitGroup
	senders := []func(context.Context, <-chan int){e.sendOne, e.sendOne, e.sendOne, e.sendBatch}
	if h.serverURL != "" {
		senders = append(senders, e.sendHTTP, e.sendHTTP)
	}
	for _, s := range senders {
		wg.Add(1)
		go func() { defer wg.Done(); s(ctx, items) }()
	}
	go func() {
		defer close(items)
		const tick = 20 * time.Millisecond
		t := time.NewTicker(tick)
		defer t.Stop()
		credit := 0.0
		for sent := 0; sent < e.total; {
			select {
			case <-e.hurry:
				for ; sent < e.total; sent++ {
					select {
					case items <- 1:
					case <-ctx.Done():
						return
					}
				}
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			credit += h.prof.rate * tick.Seconds()
			for ; credit >= 1 && sent < e.total; credit-- {
				select {
				case items <- 1:
					sent++
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	go func() { wg.Wait(); close(e.done) }()
	return e
}

func (e *enqueuer) args(seq int64) workArgs {
	ms := 1 + int(seq*7919%15)
	if seq%25 == 0 {
		ms = 300 // some long jobs, so a kill usually finds work in flight
	}
	return workArgs{Seq: seq, MS: ms}
}

// retry calls try until it succeeds, the error is final, or ctx ends.
func (e *enqueuer) retry(ctx context.Context, what string, try func() error) bool {
	wait := 20 * time.Millisecond
	for {
		err := try()
		if err == nil {
			return true
		}
		if errors.Is(err, drover.ErrInvalidArgument) {
			e.h.led.mu.Lock()
			e.h.led.refused++
			e.h.led.mu.Unlock()
			e.h.problem("%s refused as invalid: %v", what, err)
			return false
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

func (e *enqueuer) sendOne(ctx context.Context, items <-chan int) {
	for range items {
		seq := e.h.led.take()
		a := e.args(seq)
		var id int64
		if e.retry(ctx, fmt.Sprintf("enqueue seq %d", seq), func() error {
			res, err := e.h.client.Enqueue(ctx, KindWork, a, &drover.EnqueueOpts{IdempotencyKey: idemKey(seq)})
			if err == nil {
				id = res.Job.ID
			}
			return err
		}) {
			e.h.led.ack(seq, id)
		}
	}
}

func (e *enqueuer) sendBatch(ctx context.Context, items <-chan int) {
	for range items {
		n := 1
	fill:
		for n < 10 {
			select {
			case _, ok := <-items:
				if !ok {
					break fill
				}
				n++
			default:
				break fill
			}
		}
		seqs := make([]int64, n)
		params := make([]drover.EnqueueParams, n)
		for i := range seqs {
			seqs[i] = e.h.led.take()
			params[i] = drover.EnqueueParams{Kind: KindWork, Args: e.args(seqs[i]), Opts: &drover.EnqueueOpts{IdempotencyKey: idemKey(seqs[i])}}
		}
		var res []drover.EnqueueResult
		if e.retry(ctx, fmt.Sprintf("batch of %d from seq %d", n, seqs[0]), func() (err error) {
			res, err = e.h.client.EnqueueMany(ctx, params)
			return err
		}) {
			for i, r := range res {
				e.h.led.ack(seqs[i], r.Job.ID)
			}
		}
	}
}

// sendHTTP enqueues through the server's POST /jobs; the server may be down
// (killed) for a while, so errors are retried like the library's.
func (e *enqueuer) sendHTTP(ctx context.Context, items <-chan int) {
	for range items {
		seq := e.h.led.take()
		body, _ := json.Marshal(map[string]any{"kind": KindWork, "args": e.args(seq), "idempotency_key": idemKey(seq)})
		var id int64
		if e.retry(ctx, fmt.Sprintf("HTTP enqueue seq %d", seq), func() error {
			status, resp, err := e.post(ctx, "/jobs", body)
			if err != nil {
				return err
			}
			if status != http.StatusCreated && status != http.StatusOK {
				if status >= 400 && status < 500 {
					return fmt.Errorf("%w: HTTP %d: %s", drover.ErrInvalidArgument, status, resp)
				}
				return fmt.Errorf("HTTP %d: %s", status, resp)
			}
			var j struct {
				ID int64 `json:"id"`
			}
			if err := json.Unmarshal(resp, &j); err != nil || j.ID == 0 {
				return fmt.Errorf("%w: bad answer %q", drover.ErrInvalidArgument, resp)
			}
			id = j.ID
			return nil
		}) {
			e.h.led.ack(seq, id)
		}
	}
}

func (e *enqueuer) post(ctx context.Context, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.h.serverURL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
