package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/deflog"
)

// DefaultAddr is where `drover server` and `drover dev` listen.
const DefaultAddr = "127.0.0.1:7420"

// DefaultMaxPageBytes is Config.MaxPageBytes's default: what a page of jobs
// may weigh in args, metadata, results and errors before it ends early.
const DefaultMaxPageBytes = 16 << 20

// Config configures a Server. Zero values take the defaults in brackets.
type Config struct {
	// AdminToken and WorkerToken enable bearer-token auth when either is set: the
	// admin token opens every endpoint; the worker token only /internal/*.
	// /healthz is always open.
	AdminToken  string
	WorkerToken string

	LeaseDuration time.Duration  // lease given by task-claim and extended by heartbeats [30s; 0 or less: the default]
	MaxWait       time.Duration  // longest task-claim long-poll; a longer wait_seconds is cut to it [60s; negative: none]
	MaxBodyBytes  int64          // request body limit [0 or less: 2×MaxPayloadBytes + 64 KiB]
	Backoff       drover.Backoff // delay of a "retry" task-complete, kept within 0 to drover.MaxBackoff [drover.DefaultBackoff]
	Logger        *slog.Logger   // nil: warnings and errors through slog.Default()
	// IsLeader, when set, is reported by /healthz.
	IsLeader func() bool
	// MaxPayloadBytes bounds a task's output as the client bounds a job's
	// args + metadata [0 or less: the client's, Client.MaxPayloadBytes].
	MaxPayloadBytes int
	// MaxPageBytes ends a page of GET /jobs or GET /dlq early, with a
	// next_cursor to the rest, where its jobs' args, metadata, results and
	// errors would weigh more (the first job is always answered) [16 MiB;
	// 0 or less: the default]. ?limit= alone let a thousand jobs of 1 MiB
	// args be read, held and encoded at once.
	MaxPageBytes int
	// LoopbackHostsOnly refuses a request whose Host is not localhost, a
	// 127.0.0.0/8 address or [::1]. Set it for a server on a loopback address
	// without tokens (`drover dev`, `drover server` so run): a web page whose
	// host name an attacker re-points at 127.0.0.1 (DNS rebinding) is
	// same-origin to the browser, and would otherwise read and change jobs.
	LoopbackHostsOnly bool
	// WriteStallTimeout is how long writing an answer may make no progress
	// (its client reads nothing) before the request ends and its connection
	// closes [30s]. It bounds each piece of the answer written, not the
	// request: a long poll waits as long as it asks, and a large answer to
	// a client that reads it slowly is not cut short.
	WriteStallTimeout time.Duration
}

// Server is the HTTP API over one Drover database. It is an http.Handler.
type Server struct {
	client  *drover.Client
	drv     driver.Driver
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	wake    *wakeHub
	metrics *metrics
	routes  []route
	origins *http.CrossOriginProtection
	unclean http.Handler // answers a path not in clean form
	work    inflight     // claims under way and their give-backs
}

// inflight counts database work a request finishes whether or not its client
// or the server's life is still there (a claim whose COMMIT is under way, the
// give-back that follows it), so that Close can wait for it before the driver
// is closed: a give-back that met a closed pool left its job leased to a
// worker the shutdown had cut off (helper-50).
type inflight struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool
}

// begin counts one piece of work; the func it returns ends it. After Close,
// nothing is counted (Close is no longer waiting).
func (f *inflight) begin() (end func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return func() {}
	}
	f.wg.Add(1)
	return f.wg.Done
}

// wait waits up to d for the work counted so far, and reports whether it ended.
func (f *inflight) wait(d time.Duration) bool {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// route is one endpoint: its method, path pattern and who may call it.
type route struct {
	Method, Path string
	Scope        scope
}

type scope int

const (
	scopeOpen   scope = iota // no token needed
	scopeAdmin               // admin token
	scopeWorker              // worker or admin token
)

// New returns a Server over the client's database. Call Close when done, to stop
// the wake-up subscription.
func New(client *drover.Client, cfg Config) *Server {
	if cfg.LeaseDuration <= 0 { // as the drivers take it (driver.DefaultLease)
		cfg.LeaseDuration = 30 * time.Second
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 60 * time.Second
	}
	if cfg.MaxPayloadBytes <= 0 {
		// The client's: a server left at 1 MiB refused, as too large, the
		// result of a job its client had taken 2 MiB of args for, and a
		// negative one refused every result.
		cfg.MaxPayloadBytes = client.MaxPayloadBytes()
	}
	if cfg.MaxPageBytes <= 0 {
		cfg.MaxPageBytes = DefaultMaxPageBytes
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 2*int64(cfg.MaxPayloadBytes) + 64<<10
	}
	if cfg.Backoff == nil {
		cfg.Backoff = drover.DefaultBackoff
	}
	if cfg.WriteStallTimeout <= 0 {
		cfg.WriteStallTimeout = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = deflog.New()
	}
	s := &Server{client: client, drv: client.Driver(), cfg: cfg, log: log, mux: http.NewServeMux(),
		origins: http.NewCrossOriginProtection()}
	s.wake = newWakeHub(s.drv, log)
	s.metrics = newMetrics(s.drv)
	s.routes = s.register()
	return s
}

// Routes lists the endpoints the server serves (method and path pattern).
func (s *Server) Routes() []route { return s.routes }

// Metrics returns the server's metric hooks, for an in-process worker to report into.
func (s *Server) Metrics() *Metrics { return &Metrics{s.metrics} }

// Close stops background work, and waits (up to a lease) for claims under way
// and their give-backs: call it before closing the driver.
func (s *Server) Close() {
	s.wake.close()
	if !s.work.wait(s.cfg.LeaseDuration) {
		s.log.Warn("claims still under way at close; their jobs wait for their lease")
	}
}

func (s *Server) register() []route {
	var routes []route
	paths := map[string][]string{}
	handle := func(method, path string, sc scope, h func(http.ResponseWriter, *http.Request) error) {
		routes = append(routes, route{method, path, sc})
		paths[path] = append(paths[path], method)
		s.mux.Handle(method+" "+path, s.wrap(method+" "+path, sc, h))
	}
	handle("GET", "/healthz", scopeOpen, s.healthz)
	handle("GET", "/metrics", scopeAdmin, s.serveMetrics)
	handle("GET", "/openapi.json", scopeOpen, s.openapi)

	handle("POST", "/jobs", scopeAdmin, s.enqueue)
	handle("GET", "/jobs", scopeAdmin, s.listJobs)
	handle("GET", "/jobs/{id}", scopeAdmin, s.getJob)
	handle("GET", "/jobs/{id}/events", scopeAdmin, s.jobEvents)
	handle("POST", "/jobs/{id}/cancel", scopeAdmin, s.cancelJob)
	handle("GET", "/dlq", scopeAdmin, s.listDLQ)
	handle("POST", "/dlq/{id}/requeue", scopeAdmin, s.requeueDLQ)
	handle("DELETE", "/dlq", scopeAdmin, s.purgeDLQ)
	handle("GET", "/queues", scopeAdmin, s.listQueues)
	handle("POST", "/queues/{name}/pause", scopeAdmin, s.pauseQueue)
	handle("POST", "/queues/{name}/resume", scopeAdmin, s.resumeQueue)

	handle("POST", "/internal/task-claim", scopeWorker, s.taskClaim)
	handle("POST", "/internal/heartbeat", scopeWorker, s.heartbeat)
	handle("POST", "/internal/task-cancels", scopeWorker, s.taskCancels)
	handle("POST", "/internal/task-complete", scopeWorker, s.taskComplete)

	// The standard mux answers unknown paths and wrong methods in plain text; these
	// catch-alls answer in the API's JSON shape. They go through wrap as the
	// routes do: the Host guard, and drover_http_requests_total, apply to
	// every answer (route "unmatched" for a path no route has).
	for path, methods := range paths {
		allow := strings.Join(methods, ", ")
		s.mux.Handle(path, s.wrap(path, scopeOpen, func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Allow", allow)
			return &apiError{http.StatusMethodNotAllowed, CodeMethodNotAllowed,
				fmt.Sprintf("%s %s is not allowed; use %s", r.Method, path, allow)}
		}))
	}
	// The path as sent: a segment that is an escaped slash alone (%2F, as a
	// queue name) matches no route, which the unescaped form of the path
	// (/queues///pause) hides.
	s.mux.Handle("/", s.wrap("unmatched", scopeOpen, func(w http.ResponseWriter, r *http.Request) error {
		return &apiError{http.StatusNotFound, CodeNotFound, fmt.Sprintf("no endpoint %s", r.URL.EscapedPath())}
	}))
	s.unclean = s.wrap("unmatched", scopeOpen, func(w http.ResponseWriter, r *http.Request) error {
		p := r.URL.EscapedPath()
		if strings.Contains(strings.TrimLeft(p, "/"), "//") {
			// Not a base URL's trailing slash: a segment left empty, where
			// a job id or a queue name goes (a client's variable that was
			// empty). Its clean form is another path (/jobs//cancel is not
			// /jobs/cancel), so none is offered.
			return &apiError{http.StatusNotFound, CodeNotFound, fmt.Sprintf(
				"no endpoint %s: a segment of the path is empty, where a job id or a queue name goes (a variable left empty?)", p)}
		}
		return &apiError{http.StatusNotFound, CodeNotFound, fmt.Sprintf(
			"no endpoint %s: the path is not in clean form (an empty, . or .. segment; a base URL ending in / gives //); did you mean %s?", p, cleanPath(p))}
	})
	return routes
}

// ServeHTTP implements http.Handler. A path not in clean form (//jobs,
// /jobs/./1, /jobs/2/../1) is answered 404, in the API's shape and through
// wrap: the mux would answer a 307 to the clean path, outside wrap (no Host
// guard, no metric) and in HTML, which curl -f takes for a success without
// following it (a cancel that canceled nothing exited 0). Nor is it served
// as its clean path: a proxy in front that refuses /internal/* by prefix
// would pass //internal/… on.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w = newStallWriter(w, s.cfg.WriteStallTimeout)
	if p := r.URL.EscapedPath(); cleanPath(p) != p {
		s.unclean.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// stallWriter bounds how long writing an answer may make no progress:
// before each piece of at most stallChunk bytes it sets the connection's
// write deadline to now + stall. A client that stops reading a large answer
// (GET /jobs, limit 1000) held the handler's goroutine, its connection and
// the answer for ever, as the server has no write timeout: a fixed one would
// cut a long poll (POST /internal/task-claim waits up to MaxWait before it
// writes). No deadline runs while nothing is written; over HTTP/2 one would
// reset the stream even then.
type stallWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
}

// stallChunk is the most written under one deadline.
const stallChunk = 64 << 10

func newStallWriter(w http.ResponseWriter, stall time.Duration) *stallWriter {
	rc := http.NewResponseController(w)
	// A deadline an earlier request on this connection set would otherwise
	// still run, over what this one writes before its first Write (the
	// headers of an answer without a body, a 100 Continue), and could be
	// past already. ErrNotSupported (a ResponseWriter not of net/http) is
	// nothing to bound.
	_ = rc.SetWriteDeadline(time.Time{})
	return &stallWriter{ResponseWriter: w, rc: rc, stall: stall}
}

func (w *stallWriter) Write(b []byte) (int, error) {
	n := 0
	for {
		chunk := b[n:min(len(b), n+stallChunk)]
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.stall))
		m, err := w.ResponseWriter.Write(chunk)
		n += m
		if err != nil || n == len(b) {
			return n, err
		}
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// cleanPath is the clean form of an escaped path, as net/http's ServeMux
// makes it: rooted, without empty, . or .. segments, a trailing / kept.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// wrap adds auth, the body limit, panic recovery, metrics and a log line.
func (s *Server) wrap(name string, sc scope, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("handler panicked", "route", name, "panic", p, "stack", string(debug.Stack()))
				if !sw.wrote {
					s.writeError(sw, r, fmt.Errorf("panic: %v", p))
				}
			}
			status := answered(r, sw.status)
			s.metrics.request(name, status, time.Since(start))
			s.log.Debug("request", "route", name, "status", status, "took", time.Since(start))
		}()
		if err := s.loopbackHost(r); err != nil {
			s.writeError(sw, r, err)
			return
		}
		if err := s.sameOrigin(r); err != nil {
			s.writeError(sw, r, err)
			return
		}
		if err := s.authorize(r, sc); err != nil {
			s.writeError(sw, r, err)
			return
		}
		body := r.Body
		r.Body = http.MaxBytesReader(sw, r.Body, s.cfg.MaxBodyBytes)
		if err := h(sw, r); err != nil {
			if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
				// The connection closes after a body over the limit. A client
				// still sending the rest would meet that close (a broken pipe,
				// a reset) instead of the 413, and a remote worker would take
				// it for a network error and send its oversized result again
				// until its lease ran out. Read the rest first, up to a bound.
				_, _ = io.Copy(io.Discard, io.LimitReader(body, overLimitDrain))
			}
			s.writeError(sw, r, err)
		}
	})
}

// statusClientClosed is what a request whose client left before its answer
// is counted as (nginx's 499, "client closed request").
const statusClientClosed = 499

// answered is the status a request is counted and logged with: status, the
// one written (200 if none was), unless the request's context ended before
// the handler returned. Its client then had no answer (the end of an answer
// is sent after the handler returns): it left (499: a long poll it gave up
// on was counted 200), or the server's shutdown gave up on the request (503).
func answered(r *http.Request, status int) int {
	if r.Context().Err() == nil {
		return status
	}
	if life := serverLife(r.Context()); life != nil && life.Err() != nil {
		return http.StatusServiceUnavailable
	}
	return statusClientClosed
}

// overLimitDrain bounds how much of a body over MaxBodyBytes is read (and
// dropped) before the 413 is sent, so that its client is done sending.
const overLimitDrain = 32 << 20

// sameOrigin refuses a state-changing request a browser sent from another site
// (its Sec-Fetch-Site or Origin header says so): without it, any web page a
// developer opened could enqueue, cancel or claim jobs through a server on
// localhost that runs without tokens, as `drover dev` does, with a "simple"
// cross-site POST. Clients that are not browsers send neither header and pass;
// GET, HEAD and OPTIONS always pass.
func (s *Server) sameOrigin(r *http.Request) error {
	if err := s.origins.Check(r); err != nil {
		return &apiError{http.StatusForbidden, CodeForbidden,
			"cross-origin request refused: a browser page of another site may not change state here (" + err.Error() + ")"}
	}
	return nil
}

// loopbackHost enforces Config.LoopbackHostsOnly.
func (s *Server) loopbackHost(r *http.Request) error {
	if !s.cfg.LoopbackHostsOnly || IsLoopbackHost(r.Host) {
		return nil
	}
	return &apiError{http.StatusForbidden, CodeForbidden, fmt.Sprintf(
		"Host %q is not a loopback name: a server on a loopback address without tokens answers only to localhost, 127.0.0.1 and [::1] (a guard against DNS rebinding; set tokens to serve other names)", r.Host)}
}

// IsLoopbackHost reports whether host (a Host header or a listen address, with
// or without a port) names this machine's loopback interface.
func IsLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) authorize(r *http.Request, sc scope) error {
	if sc == scopeOpen || (s.cfg.AdminToken == "" && s.cfg.WorkerToken == "") {
		return nil
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" { // auth schemes are case-insensitive (RFC 9110 §11.1)
		return &apiError{http.StatusUnauthorized, CodeUnauthorized, "missing Authorization: Bearer <token>"}
	}
	if equal(token, s.cfg.AdminToken) {
		return nil
	}
	if equal(token, s.cfg.WorkerToken) {
		if sc == scopeWorker {
			return nil
		}
		return &apiError{http.StatusForbidden, CodeForbidden, "the worker token may only call /internal/*"}
	}
	return &apiError{http.StatusUnauthorized, CodeUnauthorized, "invalid token"}
}

// equal compares in constant time; an unset token never matches.
func equal(got, want string) bool {
	if want == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// ListenConfig says where and how to serve.
type ListenConfig struct {
	Addr        string // [DefaultAddr]
	TLSCertFile string // TLS when both are set
	TLSKeyFile  string
	// ShutdownTimeout is how long shutdown waits for requests in flight
	// [30s]; negative: it does not wait, and requests still running are
	// canceled at once.
	ShutdownTimeout time.Duration
	// Hurry, if set, cuts a graceful shutdown short when it ends: requests
	// still running are canceled at once, as at ShutdownTimeout, and
	// ListenAndServe returns an error that wraps context.Canceled. A command
	// line ends it at a second SIGINT or SIGTERM. Ending it before ctx ends
	// changes nothing until the shutdown starts.
	Hurry context.Context
	// Ready, if set, is called with the bound address once the listener is open.
	Ready func(addr net.Addr)
}

// shutdownKey is the context key of the channel ListenAndServe closes when it
// starts shutting down: long polls end on it. Requests' contexts are not
// canceled at shutdown: a request's context ends only when its client left,
// which is what a claim asks (ClaimParams.Abandoned), and a report under way
// is written on a live context.
type shutdownKey struct{}

// lifeKey is the context key of the server's life: the context ListenAndServe
// cancels once its shutdown's deadline has passed. Work that must outlive its
// request (a claim, which a departed worker must not cut short) ends with it.
type lifeKey struct{}

// serverLife is the server's life of ctx; nil outside ListenAndServe.
func serverLife(ctx context.Context) context.Context {
	life, _ := ctx.Value(lifeKey{}).(context.Context)
	return life
}

// shuttingDown is the shutdown channel of ctx; nil (never ready) outside
// ListenAndServe.
func shuttingDown(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(shutdownKey{}).(chan struct{})
	return ch
}

// ListenAndServe serves h until ctx ends, then shuts down gracefully: it stops
// accepting, lets requests in flight finish (long-polls end early), and returns.
func ListenAndServe(ctx context.Context, h http.Handler, lc ListenConfig, log *slog.Logger) error {
	if log == nil {
		log = deflog.New()
	}
	if lc.Addr == "" {
		lc.Addr = DefaultAddr
	}
	if lc.ShutdownTimeout == 0 {
		lc.ShutdownTimeout = 30 * time.Second
	}
	if (lc.TLSCertFile == "") != (lc.TLSKeyFile == "") {
		return driver.Invalid("tls", "give both a certificate and a key file, or neither")
	}
	ln, err := net.Listen("tcp", lc.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", lc.Addr, err)
	}
	shutdown := make(chan struct{})
	// Requests' contexts end when their client leaves, or, past the shutdown's
	// deadline, when the server gives up on them (cancelBase): a handler
	// blocked at the database is then canceled, and the driver can close.
	life, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	baseCtx := context.WithValue(context.WithValue(life, shutdownKey{}, shutdown), lifeKey{}, life)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      0, // long-polls hold responses; each handler bounds its own time
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	if lc.Ready != nil {
		lc.Ready(ln.Addr())
	}
	errc := make(chan error, 1)
	var once sync.Once
	go func() {
		var err error
		if lc.TLSCertFile != "" {
			err = srv.ServeTLS(ln, lc.TLSCertFile, lc.TLSKeyFile)
		} else {
			err = srv.Serve(ln)
		}
		once.Do(func() { errc <- err })
	}()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	close(shutdown) // ends long-polls so shutdown does not wait for them
	// A negative ShutdownTimeout gives a context already past its deadline.
	parent := context.Background()
	if lc.Hurry != nil {
		parent = lc.Hurry
	}
	sctx, cancel := context.WithTimeout(parent, lc.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		cancelBase() // the handlers still running are canceled, their database calls with them
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
