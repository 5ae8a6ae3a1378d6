package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/demo"
	"github.com/drover-dev/drover/server"
	"github.com/drover-dev/drover/wakeup"
)

// nodeFlags configure a process that works jobs (dev and worker).
type nodeFlags struct {
	queues          string
	concurrency     int
	lease           time.Duration
	poll            time.Duration
	leaderTTL       time.Duration
	shutdownTimeout time.Duration
	noEngine        bool
	id              string
	natsURL         string
	works           bool // the command runs a worker: it has the worker's flags
}

// register adds the flags; works adds the worker's (queues, concurrency, poll
// interval), which `drover server`, running no worker, would only ignore.
func (n *nodeFlags) register(cmd *cobra.Command, works bool) {
	f := cmd.Flags()
	n.works = works
	if works {
		f.StringVar(&n.queues, "queues", envOr("DROVER_QUEUES", drover.DefaultQueue), "queues to work, comma-separated (env DROVER_QUEUES)")
		f.IntVar(&n.concurrency, "concurrency", 10, "jobs run at once per queue")
		f.DurationVar(&n.poll, "poll-interval", time.Second, "fallback polling period when no wake-up arrives")
	}
	f.DurationVar(&n.lease, "lease", 30*time.Second, "lease duration, at least 100ms: how long a job stays ours without a heartbeat (a worker with --server uses the server's lease)")
	f.DurationVar(&n.leaderTTL, "leader-ttl", 15*time.Second, "engine leadership lease")
	f.DurationVar(&n.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long shutdown waits for running jobs and HTTP requests (0: it does not wait)")
	f.BoolVar(&n.noEngine, "no-engine", false, "do not campaign to run the maintenance loops")
	f.StringVar(&n.id, "id", envOr("DROVER_WORKER_ID", ""), "worker id (default host-pid-random; env DROVER_WORKER_ID)")
	f.StringVar(&n.natsURL, "nats-url", os.Getenv("DROVER_NATS_URL"), "NATS JetStream server for wake-up pointers, e.g. nats://127.0.0.1:4222; not with drover worker --server (env DROVER_NATS_URL)")
}

// minLease is the shortest --lease, the shortest lease a worker takes.
const minLease = 100 * time.Millisecond

// queueMap checks the flags and returns the worker's queues (nil for a
// command that runs no worker).
func (n *nodeFlags) queueMap() (map[string]int, error) {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"lease", n.lease}, {"leader-ttl", n.leaderTTL}} {
		if d.v <= 0 {
			return nil, driver.Invalid(d.flag, "%s, must be positive", d.v)
		}
	}
	if n.lease < minLease {
		// A worker refuses it (NewWorker), but `drover server` runs none: it
		// started, and bounding each claim's database work by the lease, it
		// answered every task-claim 503.
		return nil, driver.Invalid("lease", "%s is below %s", n.lease, minLease)
	}
	if n.leaderTTL < drover.MinLeaderTTL {
		// The engine refuses it too, but in its goroutine: the process ran on
		// with no engine, so no reaper, and said so only in its log.
		return nil, driver.Invalid("leader-ttl", "%s is below %s", n.leaderTTL, drover.MinLeaderTTL)
	}
	if n.shutdownTimeout < 0 {
		return nil, driver.Invalid("shutdown-timeout", "%s, must not be negative", n.shutdownTimeout)
	}
	if !n.works {
		return nil, nil
	}
	if n.poll <= 0 {
		return nil, driver.Invalid("poll-interval", "%s, must be positive", n.poll)
	}
	if n.concurrency < 1 || n.concurrency > drover.MaxConcurrency {
		return nil, driver.Invalid("concurrency", "%d, must be 1 to %d", n.concurrency, drover.MaxConcurrency)
	}
	qs := splitList(n.queues)
	if len(qs) == 0 {
		return nil, driver.Invalid("queues", "no queue given")
	}
	if parts := strings.Split(n.queues, ","); len(parts) != len(qs) {
		// "a,,b" or "a,": a name left out by mistake, not a queue to drop.
		return nil, driver.Invalid("queues", "%q has an empty name", n.queues)
	}
	m := map[string]int{}
	for _, q := range qs {
		if err := driver.ValidateName("queue", q); err != nil {
			return nil, err
		}
		if _, ok := m[q]; ok {
			return nil, driver.Invalid("queues", "%q is given twice", q)
		}
		m[q] = n.concurrency
	}
	return m, nil
}

// checkNATSURL refuses a --nats-url that cannot name a server, as the NATS
// client reads it (a comma-separated list; nats:// where a URL has no scheme),
// before anything is opened: it was a failure to connect, exit 1.
func checkNATSURL(urls string) error {
	if urls == "" {
		return nil
	}
	parts := strings.Split(urls, ",")
	for i, u := range parts {
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "nats://" + u
		}
		// The URL is not repeated: it may hold a password or a token.
		which := "the URL"
		if len(parts) > 1 {
			which = fmt.Sprintf("URL %d of %d", i+1, len(parts))
		}
		p, err := url.Parse(u)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // its text repeats the URL
			}
			return driver.Invalid("nats-url", "%s does not parse: %v", which, err)
		}
		if p.Hostname() == "" {
			return driver.Invalid("nats-url", "%s names no host", which)
		}
	}
	return nil
}

// nodeOpts says what one process runs.
type nodeOpts struct {
	flags   *nodeFlags
	migrate bool         // migrate PostgreSQL too (dev); SQLite always migrates
	worker  bool         // run a worker with the demo kinds
	server  *serverFlags // serve the HTTP API when set
	// ready is called once everything runs; worker may be nil, addr empty.
	ready func(c *drover.Client, w *drover.Worker, addr string) error
}

// runNode runs the engine (unless disabled), a worker with the demo kinds and/or
// the HTTP API until ctx ends, then shuts down gracefully.
func (g *globals) runNode(ctx context.Context, o nodeOpts) error {
	n := o.flags
	queues, err := n.queueMap()
	if err != nil {
		return err
	}
	if o.server != nil {
		if err := o.server.validate(); err != nil {
			return err
		}
	}
	if err := checkNATSURL(n.natsURL); err != nil {
		return err
	}
	id := n.id
	if id == "" {
		id = nodeID()
	}
	if err := driver.ValidateWorkerID("id", id); err != nil { // the engine's and the worker's
		return err
	}
	c, drv, err := g.open(ctx, o.migrate)
	if err != nil {
		return err
	}
	defer drv.Close()
	log := g.logger()
	var wakeups wakeup.Transport
	if n.natsURL != "" {
		tr, err := wakeup.NewNATS(ctx, n.natsURL, wakeup.NATSOptions{Logger: log})
		if err != nil {
			// Its error names the URL, without credentials.
			return fmt.Errorf("wake-ups over NATS: %w", err)
		}
		defer tr.Close()
		wakeups = tr
		if c, err = drover.NewClient(drv, &drover.Config{Logger: log, Wakeups: tr}); err != nil {
			return err
		}
	}

	var wg sync.WaitGroup
	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer func() { stopEngine(); wg.Wait() }()
	isLeader := func() bool { return false }
	if !n.noEngine {
		e := drover.NewEngine(c, &drover.EngineConfig{ID: id, LeaderTTL: n.leaderTTL, Logger: log, Wakeups: wakeups})
		isLeader = e.IsLeader
		wg.Add(1)
		go func() { defer wg.Done(); e.Run(engineCtx) }()
	}

	addr := ""
	serveErr := make(chan error, 1)
	var observer drover.Observer
	if o.server != nil {
		srv := server.New(c, server.Config{
			AdminToken: o.server.adminToken, WorkerToken: o.server.workerToken, LeaseDuration: n.lease,
			Logger: log, IsLeader: isLeader,
			LoopbackHostsOnly: o.server.adminToken == "" && o.server.workerToken == "" && server.IsLoopbackHost(o.server.addr),
		})
		defer srv.Close()
		observer = srv.Metrics() // the in-process worker reports into /metrics
		bound := make(chan string, 1)
		go func() {
			serveErr <- server.ListenAndServe(ctx, srv, server.ListenConfig{
				Addr: o.server.addr, TLSCertFile: o.server.tlsCert, TLSKeyFile: o.server.tlsKey,
				ShutdownTimeout: httpShutdown(n.shutdownTimeout), Hurry: g.hurry, Ready: func(a net.Addr) { bound <- a.String() },
			}, log)
		}()
		select {
		case err := <-serveErr:
			return err
		case a := <-bound:
			scheme := "http"
			if o.server.tlsCert != "" {
				scheme = "https"
			}
			addr = scheme + "://" + a
		}
	}

	var w *drover.Worker
	if o.worker {
		workers := drover.NewWorkers()
		demo.Register(workers)
		w, err = drover.NewWorker(c, &drover.WorkerConfig{
			ID: id, Queues: queues, Workers: workers, LeaseDuration: n.lease, PollInterval: n.poll, Logger: log,
			Wakeups: wakeups, Observer: observer,
		})
		if err != nil {
			return err
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
	}
	stopWorker := func() error {
		if w == nil {
			return nil
		}
		return g.stop(w, n.shutdownTimeout)
	}
	if o.ready != nil {
		if err := o.ready(c, w, addr); err != nil {
			_ = stopWorker()
			return err
		}
	}
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		_ = stopWorker()
		return err
	}
	if w == nil && o.server != nil {
		// The worker's stop says this for both (the server shuts down meanwhile).
		fmt.Fprintf(g.stderr, "shutting down: waiting for HTTP requests in flight (up to %s; a second Ctrl-C or SIGTERM cancels them now)\n", n.shutdownTimeout)
	}
	err = stopWorker()
	if o.server != nil {
		if serr := <-serveErr; serr != nil && err == nil {
			err = g.stoppedServing(serr, n.shutdownTimeout)
		}
	}
	return err
}

// httpShutdown is the server's ShutdownTimeout for --shutdown-timeout d: 0
// means no wait, which the server spells as a negative timeout (its zero is
// the default, 30 s).
func httpShutdown(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// stoppedServing is stopped for the HTTP server: requests still running when
// --shutdown-timeout ran out, or a second signal came, were canceled, which is
// the shutdown asked for.
func (g *globals) stoppedServing(err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(g.stderr, "shutdown: HTTP requests still running after --shutdown-timeout %s were canceled\n", timeout)
		return nil
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(g.stderr, "shutdown: a second signal canceled the HTTP requests still running")
		return nil
	}
	return err
}

// runRemoteWorker works the demo kinds through a server's worker protocol.
func (g *globals) runRemoteWorker(ctx context.Context, n *nodeFlags) error {
	queues, err := n.queueMap()
	if err != nil {
		return err
	}
	workers := drover.NewWorkers()
	demo.Register(workers)
	rc := drover.RemoteConfig{URL: g.server, Token: g.token}
	if g.roots != nil {
		// As NewRemoteWorker's own client: no overall timeout, no redirect followed.
		rc.HTTPClient = &http.Client{Transport: g.httpTransport(), CheckRedirect: noRedirects}
	}
	w, err := drover.NewRemoteWorker(rc, &drover.WorkerConfig{
		ID: n.id, Queues: queues, Workers: workers, LeaseDuration: n.lease, PollInterval: n.poll, Logger: g.logger(),
	})
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(g.stderr, "worker %s on server %s: queues %s, concurrency %d\n", w.ID(), g.server, n.queues, n.concurrency)
	<-ctx.Done()
	return g.stop(w, n.shutdownTimeout)
}

// stop stops w gracefully, waiting up to timeout for its running jobs, or
// until a second signal (g.hurry), and then cancels them.
func (g *globals) stop(w *drover.Worker, timeout time.Duration) error {
	fmt.Fprintf(g.stderr, "shutting down: waiting for running jobs (up to %s; a second Ctrl-C or SIGTERM cancels them now)\n", timeout)
	parent := g.hurry
	if parent == nil {
		parent = context.Background()
	}
	sctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	return g.stopped(w.Stop(sctx), timeout)
}

// stopped turns a worker's stop that ran out of time, or that a second signal
// cut short, into what it is, an orderly shutdown that canceled the jobs still
// running (they are retried), not a failure of the command.
func (g *globals) stopped(err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(g.stderr, "shutdown: jobs still running after --shutdown-timeout %s were canceled; they will be retried, or fail if that was their last attempt\n", timeout)
		return nil
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(g.stderr, "shutdown: a second signal canceled the jobs still running; they will be retried, or fail if that was their last attempt")
		return nil
	}
	return err
}

func nodeID() string {
	host, _ := os.Hostname()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

func newWorkerCmd(g *globals) *cobra.Command {
	n := &nodeFlags{}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Work jobs of the built-in demo kinds (echo, sleep, fail, noop)",
		Long: "Claims and runs jobs of the built-in kinds until interrupted, then shuts down gracefully.\n" +
			"It also campaigns to run the maintenance engine (one leader among all processes) unless --no-engine.\n" +
			"With --server URL it needs no database: it works through the server's worker protocol\n" +
			"(the server runs the engine), authenticating with --token (a worker or admin token).",
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.server != "" {
				if cmd.Flags().Changed("nats-url") {
					// Not used through a server: it was ignored without a word.
					return driver.Invalid("nats-url", "is for a worker on the database; with --server the server wakes the worker's claims (give --nats-url to drover server)")
				}
				return g.runRemoteWorker(cmd.Context(), n)
			}
			return g.runNode(cmd.Context(), nodeOpts{flags: n, worker: true,
				ready: func(c *drover.Client, w *drover.Worker, _ string) error {
					fmt.Fprintf(g.stderr, "worker %s on %s: queues %s, concurrency %d\n", w.ID(), describeURL(g.databaseURL), n.queues, n.concurrency)
					return nil
				}})
		},
	}
	n.register(cmd, true)
	return cmd
}

func newDevCmd(g *globals) *cobra.Command {
	n := &nodeFlags{}
	sf := &serverFlags{}
	var seed bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything on one machine: embedded SQLite, the engine and a worker",
		Args:  exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.runNode(cmd.Context(), nodeOpts{flags: n, migrate: true, worker: true, server: sf,
				ready: func(c *drover.Client, w *drover.Worker, addr string) error {
					out := g.stderr
					// The demo jobs and the hints go to a queue this worker works:
					// default if it is one of them, else the first (--queues emails).
					queue := devQueue(n.queues)
					onQueue, qFlag, qField := "", "", ""
					if queue != drover.DefaultQueue {
						onQueue, qFlag, qField = " on queue "+queue, " --queue "+queue, `"queue":"`+queue+`",`
					}
					fmt.Fprintf(out, "Drover dev\n  API:      %s  (try: curl %s/healthz)\n  database: %s\n  worker:   %s (queues %s, concurrency %d)\n  kinds:    echo, sleep, fail, noop\n",
						addr, addr, describeURL(g.databaseURL), w.ID(), n.queues, n.concurrency)
					if seed {
						fresh, err := seedDemo(cmd.Context(), c, queue)
						if err != nil {
							return err
						}
						if fresh > 0 {
							fmt.Fprintf(out, "  seeded %d demo jobs (echo, sleep, fail)%s; watch them below\n", fresh, onQueue)
						} else {
							fmt.Fprintln(out, "  demo jobs: seeded at an earlier start (once per database); nothing new")
						}
					}
					db := ""
					if g.databaseURL != DefaultDatabaseURL {
						db = " --database-url " + shellQuote(hintURL(g.databaseURL))
					}
					fmt.Fprintf(out, "\nIn another terminal:\n  drover%s jobs enqueue echo%s --args '{\"hello\":\"world\"}'\n  drover%s jobs list\n  drover%s dlq list\n", db, qFlag, db, db)
					// With tokens the API answers /jobs only to the admin token:
					// the hint names where it goes (not the token itself, which
					// a terminal's scrollback would keep), or, with none, says so.
					if sf.adminToken == "" && sf.workerToken != "" {
						fmt.Fprintln(out, "  (the HTTP API's /jobs needs --admin-token: with only --worker-token it serves /internal/* alone)")
					} else {
						auth := ""
						if sf.adminToken != "" {
							auth = " -H 'Authorization: Bearer <admin token>'"
						}
						fmt.Fprintf(out, "  curl -s -X POST %s/jobs -H 'Content-Type: application/json'%s -d '{\"kind\":\"echo\",%s\"args\":{\"hello\":\"http\"}}'\n", addr, auth, qField)
					}
					fmt.Fprint(out, "Press Ctrl-C to stop.\n\n")
					return nil
				}})
		},
	}
	n.register(cmd, true)
	sf.register(cmd)
	cmd.Flags().BoolVar(&seed, "seed", true, "enqueue demo jobs at start (once per database)")
	return cmd
}

// devQueue is the queue drover dev seeds and hints at, of the queues its
// worker works (--queues, checked already): the default queue if it is one of
// them, else the first.
func devQueue(queues string) string {
	qs := splitList(queues)
	for _, q := range qs {
		if q == drover.DefaultQueue {
			return q
		}
	}
	if len(qs) == 0 {
		return drover.DefaultQueue
	}
	return qs[0]
}

// seedDemo enqueues one job of each demo kind on queue; idempotency keys make
// restarts a no-op. It returns how many it enqueued now.
func seedDemo(ctx context.Context, c *drover.Client, queue string) (int, error) {
	res, err := c.EnqueueMany(ctx, []drover.EnqueueParams{
		{Kind: "echo", Args: map[string]string{"hello": "drover"}, Opts: &drover.EnqueueOpts{Queue: queue, IdempotencyKey: "dev-seed-echo"}},
		{Kind: "sleep", Args: map[string]int{"ms": 1500}, Opts: &drover.EnqueueOpts{Queue: queue, IdempotencyKey: "dev-seed-sleep"}},
		{Kind: "fail", Args: map[string]string{"message": "this job always fails; after 3 attempts it is in the DLQ"},
			Opts: &drover.EnqueueOpts{Queue: queue, IdempotencyKey: "dev-seed-fail", MaxAttempts: 3}},
	})
	fresh := 0
	for _, r := range res {
		if !r.Existing {
			fresh++
		}
	}
	return fresh, err
}

func shellQuote(s string) string {
	if strings.ContainsAny(s, " '\"$&;|<>*?`\\") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}

// hintURL is a database URL to print in a hint: its password, if it has one,
// is shown as xxxxx (the user types their own), so a terminal's scrollback or a
// shared log does not keep it.
func hintURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return raw // a SQLite path
	}
	if q := u.Query(); q.Has("password") { // pgx takes one here too
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
