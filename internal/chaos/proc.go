package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// line is one line a child printed on stdout.
type line struct {
	Proc   string // incarnation id
	Fields []string
	At     time.Time // when the harness read it
}

// lineLog collects every child's stdout lines in arrival order; subscribers are
// woken on each append, so the harness waits on signals, never on sleeps.
type lineLog struct {
	mu     sync.Mutex
	lines  []line
	notify chan struct{} // closed and replaced on each append
}

func newLineLog() *lineLog { return &lineLog{notify: make(chan struct{})} }

func (l *lineLog) add(ln line) {
	l.mu.Lock()
	l.lines = append(l.lines, ln)
	close(l.notify)
	l.notify = make(chan struct{})
	l.mu.Unlock()
}

// since returns the lines from index i on, and a channel closed at the next append.
func (l *lineLog) since(i int) ([]line, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]line(nil), l.lines[min(i, len(l.lines)):]...), l.notify
}

// await reads lines from *cursor on until match accepts one or timeout passes.
func (l *lineLog) await(cursor *int, timeout time.Duration, match func(line) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		lines, next := l.since(*cursor)
		for _, ln := range lines {
			*cursor++
			if match(ln) {
				return true
			}
		}
		select {
		case <-next:
		case <-deadline.C:
			return false
		}
	}
}

// proc is one incarnation of a child process.
type proc struct {
	slot, id string
	cfg      childConfig
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	done     chan struct{} // closed once reaped
	started  time.Time
}

// startProc starts one child: exe args... with the config in EnvChild, stdout
// lines to log, stderr appended to logPath.
func startProc(exe []string, env []string, cfg childConfig, log *lineLog, logPath string) (*proc, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	p := &proc{slot: slotOf(cfg.ID), id: cfg.ID, cfg: cfg, done: make(chan struct{})}
	p.cmd = exec.Command(exe[0], exe[1:]...)
	p.cmd.Env = append(append(append([]string(nil), os.Environ()...), env...), EnvChild+"="+string(raw))
	p.cmd.SysProcAttr = childSysProcAttr()
	errf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = errf
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		errf.Close()
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		errf.Close()
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		errf.Close()
		return nil, fmt.Errorf("start %s: %w", cfg.ID, err)
	}
	p.started = time.Now()
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			log.add(line{Proc: p.id, Fields: strings.Fields(sc.Text()), At: time.Now()})
		}
		_ = p.cmd.Wait()
		errf.Close()
		log.add(line{Proc: p.id, Fields: []string{"exited"}, At: time.Now()})
		close(p.done)
	}()
	return p, nil
}

func (p *proc) signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// kill SIGKILLs the process and waits until it is reaped.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(sigCont) // a stopped process dies at once either way
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop asks for a graceful stop (closing stdin) and kills after timeout.
func (p *proc) stop(timeout time.Duration) {
	_ = p.cmd.Process.Signal(sigCont)
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
	}
}

func (p *proc) send(cmd string) { _, _ = io.WriteString(p.stdin, cmd+"\n") }

// slotOf returns the slot of an incarnation id "slot.n".
func slotOf(id string) string {
	if i := strings.LastIndexByte(id, '.'); i >= 0 {
		return id[:i]
	}
	return id
}

// statsOf parses "stats inflight=N lease_lost=N succeeded=N".
func statsOf(f []string) map[string]int64 {
	m := map[string]int64{}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		m[k], _ = strconv.ParseInt(v, 10, 64)
	}
	return m
}
