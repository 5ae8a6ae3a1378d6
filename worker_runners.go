package drover

import (
	"context"
	"runtime/pprof"
	"sync"
	"time"
)

// runners runs a worker's jobs on goroutines it keeps between jobs, each
// taking the next job waiting as soon as it is done with one. A goroutine
// started for each job, and kept until its completion was written, cost a
// busy worker about a third of its CPU: starting and ending it, waking it
// with its batch's answer, growing its stack (copied) at least once a job,
// and scanning thousands of them parked at every GC cycle.
//
// A job waits for a goroutine only while one is on its way: when jobs wait
// and no goroutine is on its way to them, an idle one is woken, or a new one
// started; one that takes a job and leaves others waiting sends the next. So
// a handler that blocks never holds up the jobs behind it for longer than it
// takes to start a goroutine, and short handlers run one after another on a
// few goroutines instead of each on its own. Idle goroutines wait LIFO, and
// one idle through a whole retire period (runnerIdle) ends.
type runners struct {
	mu       sync.Mutex
	queue    []task // jobs waiting, from head on
	head     int
	idle     []*runner // the most recently idle last
	starting int       // goroutines started or woken that have not yet looked at queue
	live     int       // goroutines, idle or not
	epoch    uint64    // retire periods begun
	closed   bool      // an idle goroutine ends instead of waiting
	quit     chan struct{}
	done     chan struct{}
}

// task is a job handed to runners: an *execution, stored in the queue without
// a closure to allocate.
type task interface{ runTask() }

// taskFunc makes a function a task.
type taskFunc func()

func (f taskFunc) runTask() { f() }

// runnerIdle is how often idle goroutines are retired: one idle since before
// the previous retire has waited at least this long.
const runnerIdle = 5 * time.Second

type runner struct {
	wake  chan bool // true: look at the queue; false: end
	epoch uint64    // when it went idle
}

func newRunners() *runners {
	return &runners{quit: make(chan struct{}), done: make(chan struct{})}
}

// start retires idle goroutines every period until stop.
func (p *runners) start(period time.Duration) {
	go func() {
		defer close(p.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.retire()
			}
		}
	}()
}

// stop ends the idle goroutines, and each busy one once no job waits: a job
// handed to run before stop still runs.
func (p *runners) stop() {
	close(p.quit)
	<-p.done
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, r := range idle {
		r.wake <- false
	}
}

// retire ends the goroutines idle since before the last retire began a period.
func (p *runners) retire() {
	p.mu.Lock()
	n := 0
	for n < len(p.idle) && p.idle[n].epoch < p.epoch {
		n++
	}
	old := make([]*runner, n)
	copy(old, p.idle[:n])
	m := copy(p.idle, p.idle[n:])
	clear(p.idle[m:])
	p.idle = p.idle[:m]
	p.epoch++
	p.mu.Unlock()
	for _, r := range old {
		r.wake <- false
	}
}

// run has t run on one of the goroutines. t may end its goroutine
// (runtime.Goexit): the goroutine is then not reused.
func (p *runners) run(f task) {
	p.mu.Lock()
	if p.head > 0 && len(p.queue) == cap(p.queue) {
		n := copy(p.queue, p.queue[p.head:])
		clear(p.queue[n:])
		p.queue, p.head = p.queue[:n], 0
	}
	p.queue = append(p.queue, f)
	r, spawn := p.send()
	p.mu.Unlock()
	p.sent(r, spawn)
}

// send picks a goroutine to go to the waiting jobs if none is on its way:
// an idle one (r), or a new one (spawn). It is called with p.mu held; sent
// does what it picked, without it.
func (p *runners) send() (r *runner, spawn bool) {
	if p.head == len(p.queue) || p.starting > 0 {
		return nil, false
	}
	p.starting++
	if n := len(p.idle); n > 0 {
		r = p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		return r, false
	}
	return nil, true
}

func (p *runners) sent(r *runner, spawn bool) {
	switch {
	case r != nil:
		r.wake <- true
	case spawn:
		p.mu.Lock()
		p.live++
		p.mu.Unlock()
		go (&runner{wake: make(chan bool, 1)}).loop(p)
	}
}

// take is the next waiting job, or nil; with p.mu held.
func (p *runners) take() task {
	if p.head == len(p.queue) {
		return nil
	}
	f := p.queue[p.head]
	p.queue[p.head] = nil
	p.head++
	if p.head == len(p.queue) {
		p.queue, p.head = p.queue[:0], 0
	}
	return f
}

// loop runs waiting jobs until none is left, then waits to be woken.
func (r *runner) loop(p *runners) {
	defer func() { // also when a job ends the goroutine
		p.mu.Lock()
		p.live--
		p.mu.Unlock()
	}()
	p.mu.Lock()
	p.starting--
	for {
		f := p.take()
		if f == nil {
			if p.closed {
				p.mu.Unlock()
				return
			}
			r.epoch = p.epoch
			p.idle = append(p.idle, r)
			p.mu.Unlock()
			if !<-r.wake {
				return
			}
			p.mu.Lock()
			p.starting--
			continue
		}
		next, spawn := p.send()
		p.mu.Unlock()
		p.sent(next, spawn)
		f.runTask()
		// A handler may have set its goroutine's profiler labels
		// (pprof.SetGoroutineLabels rather than pprof.Do, which restores
		// them): the next job on this goroutine, and the goroutines it starts
		// (a new runner among them), must not carry them.
		pprof.SetGoroutineLabels(context.Background())
		p.mu.Lock()
	}
}

// counts is how many goroutines wait to be woken, and how many there are
// (for tests).
func (p *runners) counts() (idle, live int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle), p.live
}
