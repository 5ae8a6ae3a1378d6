package drover_test

// Subprocess helpers for the crash and failover tests. A test re-executes its own
// binary with -test.run=^TestHelperProcess$ and DROVER_HELPER=<mode>; the helper
// runs a real Worker or Engine against the database in DROVER_HELPER_URL and
// reports what it does as lines on stdout, which the parent reads to know when to
// act (never by sleeping). The helper exits when its stdin closes, so a helper
// outlives neither a graceful stop nor a parent that died.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover"
)

const (
	envHelper        = "DROVER_HELPER"            // mode: "worker" or "engine"; unset: not a helper
	envHelperURL     = "DROVER_HELPER_URL"        // database URL or SQLite path
	envHelperID      = "DROVER_HELPER_ID"         // worker or engine id
	envHelperTTL     = "DROVER_HELPER_TTL"        // engine: LeaderTTL
	envHelperLease   = "DROVER_HELPER_LEASE"      // worker: LeaseDuration
	envHelperHoldMod = "DROVER_HELPER_HOLD_EVERY" // worker: jobs with i % n == 0 hold their first attempt until killed
	envHelperServer  = "DROVER_HELPER_SERVER"     // remote-worker: the server's URL (no database access)
)

// crashArgs are the args of the "crashwork" kind.
type crashArgs struct {
	I int `json:"i"`
}

// TestHelperProcess is not a test: it is the body of the subprocesses started by
// startHelper, and returns at once when run normally.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(envHelper)
	if mode == "" {
		return
	}
	os.Exit(runHelper(mode))
}

func runHelper(mode string) int {
	out := &syncWriter{w: os.Stdout}
	fatal := func(format string, a ...any) int {
		fmt.Fprintf(out, "fatal "+format+"\n", a...)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the parent closes stdin (or dies) to stop us
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	id := os.Getenv(envHelperID)
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if mode == "remote-worker" {
		return runRemoteHelper(ctx, out, id, logger, fatal)
	}
	drv, err := drover.Open(ctx, os.Getenv(envHelperURL), logger)
	if err != nil {
		return fatal("open: %v", err)
	}
	defer drv.Close()
	client, err := drover.NewClient(drv, &drover.Config{Logger: logger})
	if err != nil {
		return fatal("client: %v", err)
	}

	switch mode {
	case "worker":
		lease, err := time.ParseDuration(os.Getenv(envHelperLease))
		if err != nil {
			return fatal("%s: %v", envHelperLease, err)
		}
		ws := crashWorkers(out, id)
		w, err := drover.NewWorker(client, &drover.WorkerConfig{
			ID: id, Queues: map[string]int{drover.DefaultQueue: 8}, Workers: ws,
			LeaseDuration: lease, HeartbeatInterval: lease / 4, PollInterval: 50 * time.Millisecond,
			Logger: logger,
		})
		if err != nil {
			return fatal("worker: %v", err)
		}
		if err := w.Start(ctx); err != nil {
			return fatal("start: %v", err)
		}
		fmt.Fprintf(out, "ready %s\n", id)
		<-ctx.Done()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = w.Stop(sctx)
	case "engine":
		ttl, err := time.ParseDuration(os.Getenv(envHelperTTL))
		if err != nil {
			return fatal("%s: %v", envHelperTTL, err)
		}
		e := drover.NewEngine(client, &drover.EngineConfig{
			ID: id, LeaderTTL: ttl, ReapInterval: 100 * time.Millisecond, ReconcileInterval: 100 * time.Millisecond,
			Logger: logger,
			OnLeader: func(leading bool) {
				fmt.Fprintf(out, "leader %t %s %d\n", leading, id, time.Now().UnixNano())
			},
		})
		fmt.Fprintf(out, "ready %s\n", id)
		e.Run(ctx)
	default:
		return fatal("unknown helper mode %q", mode)
	}
	return 0
}

// crashWorkers registers the "crashwork" kind: it prints a "started" line, works
// a few milliseconds, and (with DROVER_HELPER_HOLD_EVERY=n) holds the first attempt
// of every n-th job until killed.
func crashWorkers(out io.Writer, id string) *drover.Workers {
	holdEvery, _ := strconv.Atoi(os.Getenv(envHelperHoldMod))
	ws := drover.NewWorkers()
	drover.Register(ws, "crashwork", func(ctx context.Context, job *drover.Job, args crashArgs) (any, error) {
		fmt.Fprintf(out, "started %d %d %s\n", job.ID, job.Attempt, job.LeaseToken)
		work := 3 * time.Millisecond // simulated work
		if holdEvery > 0 && args.I%holdEvery == 0 && job.Attempt == 1 {
			work = time.Hour // a long job: still running when the parent kills us
		}
		t := time.NewTimer(work)
		defer t.Stop()
		select {
		case <-t.C:
			return map[string]any{"i": args.I, "by": id}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	return ws
}

// runRemoteHelper runs a remote worker: it reaches jobs only through the server
// at DROVER_HELPER_SERVER and never opens the database.
func runRemoteHelper(ctx context.Context, out io.Writer, id string, logger *slog.Logger, fatal func(string, ...any) int) int {
	lease, err := time.ParseDuration(os.Getenv(envHelperLease))
	if err != nil {
		return fatal("%s: %v", envHelperLease, err)
	}
	w, err := drover.NewRemoteWorker(drover.RemoteConfig{URL: os.Getenv(envHelperServer), WaitSeconds: 1},
		&drover.WorkerConfig{
			ID: id, Queues: map[string]int{drover.DefaultQueue: 8}, Workers: crashWorkers(out, id),
			LeaseDuration: lease, HeartbeatInterval: lease / 4, PollInterval: 50 * time.Millisecond, Logger: logger,
		})
	if err != nil {
		return fatal("remote worker: %v", err)
	}
	if err := w.Start(ctx); err != nil {
		return fatal("start: %v", err)
	}
	fmt.Fprintf(out, "ready %s\n", id)
	<-ctx.Done()
	sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
	defer c()
	_ = w.Stop(sctx)
	return 0
}

// syncWriter serialises writes so lines from several goroutines never interleave.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// procLine is one line a helper printed, or (Exit) the note that it exited.
type procLine struct {
	Proc string
	Text string
	At   time.Time // when the parent read it
	Exit bool
}

// outputLog collects the stdout lines of one or more helpers in arrival order.
// Appending never blocks, so a helper never stalls on a full pipe.
type outputLog struct {
	mu     sync.Mutex
	lines  []procLine
	notify chan struct{}
	procs  map[string]*helperProc
}

func newOutputLog() *outputLog {
	return &outputLog{notify: make(chan struct{}, 1), procs: map[string]*helperProc{}}
}

func (l *outputLog) add(pl procLine) {
	l.mu.Lock()
	l.lines = append(l.lines, pl)
	l.mu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

// since returns the lines from index i on.
func (l *outputLog) since(i int) []procLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]procLine(nil), l.lines[i:]...)
}

// await reads lines from index *cursor on until match returns true for one,
// advancing *cursor past it, and fails the test after timeout or when a helper
// exits without having been stopped. It returns the matching line.
func (l *outputLog) await(t *testing.T, cursor *int, timeout time.Duration, what string, match func(procLine) bool) procLine {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		for _, pl := range l.since(*cursor) {
			*cursor++
			if pl.Exit && !l.procs[pl.Proc].stopping.Load() {
				t.Fatalf("waiting for %s: helper %s %s\n%s", what, pl.Proc, pl.Text, l.describe())
			}
			if strings.HasPrefix(pl.Text, "fatal ") {
				t.Fatalf("waiting for %s: helper %s: %s", what, pl.Proc, pl.Text)
			}
			if match(pl) {
				return pl
			}
		}
		select {
		case <-l.notify:
		case <-deadline.C:
			t.Fatalf("waiting for %s: nothing after %s\n%s", what, timeout, l.describe())
		}
	}
}

// describe returns the last lines and each helper's stderr, for failure messages.
func (l *outputLog) describe() string {
	l.mu.Lock()
	lines := l.lines[max(0, len(l.lines)-30):]
	var b strings.Builder
	fmt.Fprintf(&b, "last %d stdout lines:\n", len(lines))
	for _, pl := range lines {
		fmt.Fprintf(&b, "  [%s] %s\n", pl.Proc, pl.Text)
	}
	procs := make([]*helperProc, 0, len(l.procs))
	for _, p := range l.procs {
		procs = append(procs, p)
	}
	l.mu.Unlock()
	for _, p := range procs {
		if s := p.stderr.tail(2000); s != "" {
			fmt.Fprintf(&b, "stderr of %s:\n%s\n", p.name, s)
		}
	}
	return b.String()
}

// lineWriter splits a helper's stdout into lines for an outputLog.
type lineWriter struct {
	log     *outputLog
	proc    string
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.log.add(procLine{Proc: w.proc, Text: string(w.partial[:i]), At: time.Now()})
		w.partial = w.partial[i+1:]
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	return s[max(0, len(s)-n):]
}

// helperProc is a running helper subprocess.
type helperProc struct {
	name     string
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stderr   lockedBuffer
	done     chan struct{} // closed once the process was reaped
	waitErr  error
	stopping atomic.Bool // an exit is expected from now on
}

// startHelper starts the test binary as a helper in mode with extra environment
// ("KEY=value"), feeding its stdout to log under name. It is SIGKILLed and reaped
// at cleanup if still running.
func startHelper(t *testing.T, log *outputLog, name, mode string, env ...string) *helperProc {
	t.Helper()
	p := &helperProc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	p.cmd.Env = append(append(os.Environ(), envHelper+"="+mode, envHelperID+"="+name), env...)
	p.cmd.Stdout = &lineWriter{log: log, proc: name}
	p.cmd.Stderr = &p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatalf("helper %s: stdin: %v", name, err)
	}
	p.stdin = stdin
	log.mu.Lock()
	log.procs[name] = p
	log.mu.Unlock()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start helper %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait() // returns once stdout is drained into log
		state := "exited"
		if p.waitErr != nil {
			state = "exited: " + p.waitErr.Error()
		}
		log.add(procLine{Proc: name, Text: state, At: time.Now(), Exit: true})
		close(p.done)
	}()
	t.Cleanup(func() { p.kill(t) })
	return p
}

// kill SIGKILLs the helper (if it still runs) and waits until it is reaped. It
// returns when the signal was sent.
func (p *helperProc) kill(t *testing.T) time.Time {
	t.Helper()
	p.stopping.Store(true)
	at := time.Now()
	select {
	case <-p.done:
		return at
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Logf("SIGKILL %s: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Errorf("helper %s (pid %d) not reaped 30s after SIGKILL", p.name, p.cmd.Process.Pid)
	}
	return at
}

// requireKilled fails the test unless the helper, reaped, died of a SIGKILL:
// not an exit of its own (a crash, or a graceful stop) before the signal came.
func (p *helperProc) requireKilled(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("helper %s (pid %d) not reaped", p.name, p.cmd.Process.Pid)
	}
	var ee *exec.ExitError
	if !errors.As(p.waitErr, &ee) {
		t.Fatalf("helper %s: exit %v, want death by SIGKILL", p.name, p.waitErr)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && !(ws.Signaled() && ws.Signal() == syscall.SIGKILL) {
		t.Fatalf("helper %s: %v, want death by SIGKILL", p.name, p.waitErr)
	}
}

// fields splits a line into words.
func fields(s string) []string { return strings.Fields(s) }

// scanKV returns the value of key=value in a slog text line, or "".
func scanKV(line, key string) string {
	sc := bufio.NewScanner(strings.NewReader(line))
	sc.Split(bufio.ScanWords)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+"="); ok {
			return v
		}
	}
	return ""
}

// eventually polls cond every 50ms until it reports true, failing the test with
// cond's last description of the state after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s; last state: %s", what, timeout, state)
		}
		<-tick.C
	}
}
