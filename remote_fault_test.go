package drover_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/server"
)

// faultKind is what a faultProxy does to one request.
type faultKind int

const (
	pass         faultKind = iota
	dropRequest            // not forwarded; the connection is cut
	hangRequest            // not forwarded, not answered, until the client leaves
	dropAnswer             // forwarded and applied; the connection is cut instead of the answer
	cutBody                // forwarded; half the answer's body, then the connection is cut
	answerStatus           // not forwarded; answered with status (502, 503)
	duplicate              // forwarded twice, one after the other; the second's answer is sent
	delayRequest           // forwarded after delay (the client may leave meanwhile)
	delayAnswer            // forwarded; its answer held back for delay
	holdRequest            // held until hold closes, then forwarded even if the client left
	trickleBody            // not forwarded; answered with status, its body a byte every delay until the client leaves
)

type fault struct {
	kind   faultKind
	status int
	delay  time.Duration
	hold   <-chan struct{} // holdRequest's
	// answered, if set, is closed once the server has answered the request.
	answered chan struct{}
}

// proxyReq is what a rule sees of a request: its path, how many requests of
// that path came before it (n, from 1), and its body.
type proxyReq struct {
	path string
	n    int
	body []byte
}

// faultProxy is a reverse proxy on loopback between a remote worker and a
// server. rule decides the fault of each request; restartServer swaps the
// server behind it for a new one over the same database.
type faultProxy struct {
	t      *testing.T
	hs     *httptest.Server
	tr     *http.Transport
	target atomic.Pointer[string]

	mu    sync.Mutex
	rule  func(proxyReq) fault
	count map[string]int
	// seen gets every request's proxyReq once its fault is decided (never blocks).
	seen chan proxyReq
}

func newFaultProxy(t *testing.T) *faultProxy {
	p := &faultProxy{t: t, tr: &http.Transport{}, count: map[string]int{}, seen: make(chan proxyReq, 1024)}
	p.hs = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() { p.hs.Close(); p.tr.CloseIdleConnections() })
	return p
}

func (p *faultProxy) setRule(rule func(proxyReq) fault) {
	p.mu.Lock()
	p.rule = rule
	p.mu.Unlock()
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	p.mu.Lock()
	p.count[r.URL.Path]++
	pr := proxyReq{path: r.URL.Path, n: p.count[r.URL.Path], body: body}
	f := fault{}
	if p.rule != nil {
		f = p.rule(pr)
	}
	p.mu.Unlock()
	select {
	case p.seen <- pr:
	default:
	}
	switch f.kind {
	case dropRequest:
		panic(http.ErrAbortHandler)
	case hangRequest:
		<-r.Context().Done()
		panic(http.ErrAbortHandler)
	case answerStatus:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(f.status)
		_, _ = w.Write([]byte("<html>bad gateway</html>"))
		return
	case trickleBody:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(f.status)
		for {
			_, _ = w.Write([]byte("."))
			w.(http.Flusher).Flush()
			select {
			case <-time.After(f.delay):
			case <-r.Context().Done():
				panic(http.ErrAbortHandler)
			}
		}
	case holdRequest:
		<-f.hold // a proxy that forwards what it queued, whether or not its client is still there
	case delayRequest:
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			panic(http.ErrAbortHandler)
		}
	}
	// The upstream request is not canceled by the client's leaving once it
	// is sent, as a proxy that has forwarded a body waits for its answer.
	ctx := context.WithoutCancel(r.Context())
	forward := func() (int, http.Header, []byte, error) {
		req, _ := http.NewRequestWithContext(ctx, r.Method, *p.target.Load()+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := p.tr.RoundTrip(req)
		if err != nil {
			return 0, nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b, err
	}
	if f.kind == duplicate {
		_, _, _, _ = forward()
	}
	status, hdr, out, err := forward()
	if f.answered != nil {
		close(f.answered)
	}
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("bad gateway: " + err.Error()))
		return
	}
	switch f.kind {
	case dropAnswer:
		panic(http.ErrAbortHandler)
	case delayAnswer:
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			panic(http.ErrAbortHandler)
		}
	}
	for k, v := range hdr {
		w.Header()[k] = v
	}
	if f.kind == cutBody {
		w.Header().Del("Content-Length")
		w.WriteHeader(status)
		_, _ = w.Write(out[:len(out)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// faultEnv is a real server over a real database behind a faultProxy.
type faultEnv struct {
	t     *testing.T
	kind  string
	dbURL string
	c     *drover.Client // enqueues and inspects
	cfg   server.Config
	proxy *faultProxy

	mu   sync.Mutex
	stop func() // closes the current server
}

func newFaultEnv(t *testing.T, kind string, cfg server.Config) *faultEnv {
	t.Helper()
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = serverLease
	}
	if cfg.Backoff == nil {
		cfg.Backoff = func(int) time.Duration { return 0 }
	}
	e := &faultEnv{t: t, kind: kind, dbURL: testdb.URL(t, kind), cfg: cfg}
	c, err := drover.NewClient(testdb.OpenURL(t, kind, e.dbURL), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	e.proxy = newFaultProxy(t)
	e.startServer(c)
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.stop()
	})
	return e
}

func (e *faultEnv) url() string { return e.proxy.hs.URL }

func (e *faultEnv) startServer(c *drover.Client) {
	s := server.New(c, e.cfg)
	hs := httptest.NewServer(s)
	u := hs.URL
	e.proxy.target.Store(&u)
	e.stop = func() { hs.CloseClientConnections(); hs.Close(); s.Close() }
}

// restartServer closes the server and starts a new one over the same
// database, through a client of its own (a new process's).
func (e *faultEnv) restartServer() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stop()
	c, err := drover.NewClient(testdb.OpenURL(e.t, e.kind, e.dbURL), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.startServer(c)
}

// requestID is the request_id of a body, or "".
func requestID(body []byte) string {
	var b struct {
		RequestID string `json:"request_id"`
	}
	_ = json.Unmarshal(body, &b)
	return b.RequestID
}

// faultName names a fault for a subtest.
func (f fault) String() string {
	switch f.kind {
	case dropRequest:
		return "drop-request"
	case dropAnswer:
		return "drop-answer"
	case cutBody:
		return "cut-body"
	case answerStatus:
		return http.StatusText(f.status)
	case duplicate:
		return "duplicate"
	case delayAnswer:
		return "delay-answer"
	case delayRequest:
		return "delay-request"
	case hangRequest:
		return "hang"
	case trickleBody:
		return "trickle-" + http.StatusText(f.status)
	}
	return "pass"
}

// A claim's answer held up on its way into the last part of its lease, but
// before its give-back point (half a heartbeat interval before the lease's
// end): the worker runs it, so it must heartbeat it like any other and let it
// finish, not cancel it at once for a lease it never tried to renew.
func TestFaultLateClaimAnswerIsHeartbeated(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := newFaultEnv(t, kind, server.Config{})
		var held atomic.Bool
		e.proxy.setRule(func(r proxyReq) fault {
			if r.path == "/internal/task-claim" && !held.Load() {
				// The first claim (the job is ready before the worker starts).
				held.Store(true)
				return fault{kind: delayAnswer, delay: 1600 * time.Millisecond}
			}
			return fault{}
		})
		ws := drover.NewWorkers()
		var runs atomic.Int32
		drover.Register(ws, "pay", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
			runs.Add(1)
			select {
			case <-time.After(500 * time.Millisecond):
				return "paid", nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		})
		cfg := fastWorkerConfig(ws) // lease 2s, heartbeat 200ms, grace 500ms
		logs := &logBuffer{}
		cfg.Logger = logs.logger()
		id := enqueue(t, e.c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 3}).ID
		startRemoteWorker(t, drover.RemoteConfig{URL: e.url(), WaitSeconds: 1}, cfg)
		j := waitStatus(t, e.c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Executions != 1 || runs.Load() != 1 {
			t.Errorf("%s after %d runs; want succeeded, run once (or given back unrun first)\n%s", describe(j), runs.Load(), logs.String())
		}
	})
}

// A claim the worker gave up on (no answer for a long poll and a lease, its
// resends included) may still reach the server later: a proxy that queued it
// forwards it whether or not its client is still there. It claimed the next
// ready job for a worker that had moved on to another request_id, and the job
// sat running under nobody until its lease expired, when the reaper failed a
// max_attempts 1 job that never ran. A worker that gives up on a claim now
// closes its request_id (a collect, as at Stop), so the late copy claims
// nothing, and the job runs.
func TestFaultClaimGivenUpOnClaimsNothingLater(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := newFaultEnv(t, kind, server.Config{})
		runEngine(t, e.c)
		release := make(chan struct{})
		late := fault{kind: holdRequest, hold: release, answered: make(chan struct{})}
		var first atomic.Value // the held claim's request_id
		movedOn := make(chan struct{}, 1)
		e.proxy.setRule(func(r proxyReq) fault {
			if r.path != "/internal/task-claim" {
				return fault{}
			}
			id := requestID(r.body)
			if first.CompareAndSwap(nil, id) {
				return late
			}
			if id == first.Load() || bytes.Contains(r.body, []byte(`"replay_only"`)) {
				return fault{} // its resends and a collect of it reach the server
			}
			select {
			case <-late.answered:
				return fault{}
			default:
			}
			select {
			case movedOn <- struct{}{}:
			default:
			}
			// Until the held claim has reached the server, the worker's
			// later claims find it restarting.
			return fault{kind: answerStatus, status: http.StatusServiceUnavailable}
		})
		cfg, runs, logs := payConfig() // lease 2s
		startRemoteWorker(t, drover.RemoteConfig{URL: e.url(), WaitSeconds: 1}, cfg)
		waitChan(t, movedOn, "the worker to give up on its first claim")
		id := enqueue(t, e.c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		close(release)
		<-late.answered
		j := waitStatus(t, e.c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || runs.Load() != 1 {
			t.Errorf("%s after %d runs; want succeeded, run once\n%s", describe(j), runs.Load(), logs.String())
		}
	})
}

// A claim that took a job but whose answer never reached the worker (every
// resend failed until the worker gave up on it): the worker collects it and
// gives the job back unrun, where it sat running under nobody until its lease
// expired and the reaper failed a max_attempts 1 job that never ran.
func TestFaultClaimGivenUpOnIsGivenBack(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		// The server's lease outlasts the worker's resends (a long poll and
		// its own 2 s lease, as it knows no server's yet).
		e := newFaultEnv(t, kind, server.Config{LeaseDuration: 8 * time.Second})
		runEngine(t, e.c)
		var first atomic.Value
		e.proxy.setRule(func(r proxyReq) fault {
			if r.path != "/internal/task-claim" {
				return fault{}
			}
			id := requestID(r.body)
			switch {
			case first.CompareAndSwap(nil, id):
				return fault{kind: dropAnswer} // claimed; the answer is lost
			case id == first.Load() && !bytes.Contains(r.body, []byte(`"replay_only"`)):
				return fault{kind: answerStatus, status: http.StatusBadGateway} // every resend
			}
			return fault{}
		})
		cfg, runs, logs := payConfig() // lease 2s
		id := enqueue(t, e.c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		startRemoteWorker(t, drover.RemoteConfig{URL: e.url(), WaitSeconds: 1}, cfg)
		j := waitStatus(t, e.c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || runs.Load() != 1 || j.Executions != 1 {
			t.Errorf("%s after %d runs; want succeeded, run once\n%s", describe(j), runs.Load(), logs.String())
		}
	})
}

// A report whose request is swallowed on its way (a proxy that accepts it and
// never answers, a stale pooled connection to a server that went away) is
// sent again within the lease, with its request_id. One such request held the
// report for its whole deadline, a lease: the result of a handler that had
// succeeded was dropped ("could not record the result"), the job sat running
// until the reaper took it, and the handler ran a second time.
func TestFaultSwallowedReportIsSentAgain(t *testing.T) {
	for _, outcome := range []string{"succeeded", "failed"} {
		t.Run(outcome, func(t *testing.T) {
			forEachKind(t, func(t *testing.T, kind string) {
				e := newFaultEnv(t, kind, server.Config{})
				runEngine(t, e.c)
				var hit atomic.Bool
				e.proxy.setRule(func(r proxyReq) fault {
					if r.path == "/internal/task-complete" && hit.CompareAndSwap(false, true) {
						return fault{kind: hangRequest}
					}
					return fault{}
				})
				ws := drover.NewWorkers()
				var runs atomic.Int32
				drover.Register(ws, "pay", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
					runs.Add(1)
					if outcome == "failed" {
						return nil, drover.Permanent(io.ErrUnexpectedEOF)
					}
					return "paid", nil
				})
				cfg := fastWorkerConfig(ws) // lease 2s
				logs := &logBuffer{}
				cfg.Logger = logs.logger()
				id := enqueue(t, e.c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 3}).ID
				startRemoteWorker(t, drover.RemoteConfig{URL: e.url(), WaitSeconds: 1}, cfg)
				j := waitStatus(t, e.c, id, drover.StatusSucceeded, drover.StatusFailed)
				if j.Attempt != 1 || runs.Load() != 1 {
					t.Errorf("%s after %d runs; want it reported at attempt 1, run once\n%s", describe(j), runs.Load(), logs.String())
				}
			})
		})
	}
}

// A give-back (here of a claim whose answer came too late to run it) whose
// answer is lost is sent again with its request_id: the server answers the
// resend as a replay of the first sending, which applied, and the worker
// counts the job given back. Resent without one, it was refused as stale
// (409), logged given_back=false and counted as a lost lease.
func TestFaultGiveBackWhoseAnswerIsLostIsGivenBack(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := newFaultEnv(t, kind, server.Config{LeaseDuration: time.Second})
		var held atomic.Bool
		var mu sync.Mutex
		var giveBacks []string // their request_ids
		e.proxy.setRule(func(r proxyReq) fault {
			switch {
			case r.path == "/internal/task-claim" && held.CompareAndSwap(false, true):
				// The first claim (the job is ready before the worker
				// starts): answered past its give-back point (0.9 s).
				return fault{kind: delayAnswer, delay: 1200 * time.Millisecond}
			case r.path == "/internal/task-complete" && bytes.Contains(r.body, []byte(`"snooze_seconds":0`)):
				mu.Lock()
				defer mu.Unlock()
				giveBacks = append(giveBacks, requestID(r.body))
				if len(giveBacks) == 1 {
					return fault{kind: dropAnswer} // applied; its answer lost
				}
			}
			return fault{}
		})
		cfg, runs, logs := payConfig() // lease 2s
		obs := &outcomes{finished: make(chan string, 4), lost: make(chan int64, 4)}
		cfg.Observer = obs
		id := enqueue(t, e.c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
		w := startRemoteWorker(t, drover.RemoteConfig{URL: e.url(), WaitSeconds: 1}, cfg)
		j := waitStatus(t, e.c, id, drover.StatusSucceeded, drover.StatusFailed)
		waitFor(t, "the give-back's log line", func() bool { return strings.Contains(logs.String(), "given_back=") })
		mu.Lock()
		sent := slices.Clone(giveBacks)
		mu.Unlock()
		if len(sent) < 2 || sent[0] == "" || slices.ContainsFunc(sent, func(id string) bool { return id != sent[0] }) {
			t.Errorf("give-back sendings' request_ids %q; want two or more, all the first's, not empty", sent)
		}
		if j.Status != drover.StatusSucceeded || runs.Load() != 1 {
			t.Errorf("%s after %d runs; want succeeded after one run", describe(j), runs.Load())
		}
		if n := w.Stats().LeaseLost.Load(); n != 0 || !strings.Contains(logs.String(), "given_back=true") {
			t.Errorf("LeaseLost %d, want 0, and the give-back logged given_back=true\n%s", n, logs.String())
		}
		select {
		case lost := <-obs.lost:
			t.Errorf("Observer.LeaseLost(job %d) was called for a job given back", lost)
		default:
		}
	})
}

// A handler canceled because its lease could not be renewed (every heartbeat
// answered 503) that returns its context's cause, as is or wrapped, has its
// attempt's error say why once. The worker prefixed the cause to an error
// that already carried it, and the stored error said it twice.
func TestFaultLeaseGiveUpIsSaidOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		ret  func(ctx context.Context) error
	}{
		{"cause", context.Cause},
		{"wrapped cause", func(ctx context.Context) error { return fmt.Errorf("charge card: %w", context.Cause(ctx)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachKind(t, func(t *testing.T, kind string) {
				e := newFaultEnv(t, kind, server.Config{})
				e.proxy.setRule(func(r proxyReq) fault {
					if r.path == "/internal/heartbeat" {
						return fault{kind: answerStatus, status: http.StatusServiceUnavailable}
					}
					return fault{}
				})
				ws := drover.NewWorkers()
				drover.Register(ws, "pay", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
					<-ctx.Done()
					return nil, tc.ret(ctx)
				})
				cfg := fastWorkerConfig(ws) // lease 2s, heartbeat 200ms, grace 500ms
				id := enqueue(t, e.c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 1}).ID
				startRemoteWorker(t, drover.RemoteConfig{URL: e.url(), WaitSeconds: 1}, cfg)
				j := waitStatus(t, e.c, id, drover.StatusSucceeded, drover.StatusFailed)
				const said = "no heartbeat succeeded"
				if n := strings.Count(j.Error, said); j.Status != drover.StatusFailed || n != 1 {
					t.Errorf("%s; want failed, its error saying %q once (%d times)", describe(j), said, n)
				}
			})
		})
	}
}

// A report answered with an error whose body never ends (a proxy's 502 page
// that trickles in a byte at a time) is cut, as a report whose answer does
// not begin is, and sent again with its request_id. The cut stopped at the
// answer's first byte, and reading the error's body held the report until
// its deadline, a lease: the worker gave up on the result, the job sat
// running until the reaper took it, and the handler ran a second time.
func TestFaultTricklingErrorAnswerIsCut(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := newFaultEnv(t, kind, server.Config{})
		runEngine(t, e.c)
		var hit atomic.Bool
		e.proxy.setRule(func(r proxyReq) fault {
			if r.path == "/internal/task-complete" && hit.CompareAndSwap(false, true) {
				return fault{kind: trickleBody, status: http.StatusBadGateway, delay: 20 * time.Millisecond}
			}
			return fault{}
		})
		cfg, runs, logs := payConfig() // lease 2s
		id := enqueue(t, e.c, "pay", nil, &drover.EnqueueOpts{MaxAttempts: 3}).ID
		startRemoteWorker(t, drover.RemoteConfig{URL: e.url(), WaitSeconds: 1}, cfg)
		j := waitStatus(t, e.c, id, drover.StatusSucceeded, drover.StatusFailed)
		if j.Status != drover.StatusSucceeded || j.Attempt != 1 || runs.Load() != 1 {
			t.Errorf("%s after %d runs; want succeeded at attempt 1, run once\n%s", describe(j), runs.Load(), logs.String())
		}
	})
}

// payConfig is a worker config (fastWorkerConfig: lease 2s) with one kind,
// "pay", whose handler counts its runs in runs and succeeds at once; the
// worker logs into logs.
func payConfig() (cfg *drover.WorkerConfig, runs *atomic.Int32, logs *logBuffer) {
	ws := drover.NewWorkers()
	runs = &atomic.Int32{}
	drover.Register(ws, "pay", func(ctx context.Context, job *drover.Job, _ struct{}) (any, error) {
		runs.Add(1)
		return "paid", nil
	})
	cfg = fastWorkerConfig(ws)
	logs = &logBuffer{}
	cfg.Logger = logs.logger()
	return cfg, runs, logs
}
