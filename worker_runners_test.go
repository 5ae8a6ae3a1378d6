package drover

import (
	"context"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"
)

// Jobs that block do not hold up the jobs handed over after them: each gets a
// goroutine of its own while the others wait.
func TestRunnersBlockedJobsDoNotHoldUpOthers(t *testing.T) {
	p := newRunners()
	p.start(time.Hour)
	defer p.stop()
	const n = 200
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	var done sync.WaitGroup
	done.Add(n)
	for range n {
		p.run(taskFunc(func() {
			defer done.Done()
			started.Done()
			<-release // every job waits until all have started
		}))
	}
	started.Wait()
	close(release)
	done.Wait()
	if idle, live := waitIdle(p); idle != n || live != n {
		t.Fatalf("%d goroutines (%d idle) after %d jobs that blocked together, want %d", live, idle, n, n)
	}
}

// Jobs that do not block run one after another on a few goroutines, which
// stay for the next jobs until a retire period passes with them idle.
func TestRunnersReuseAndRetire(t *testing.T) {
	p := newRunners()
	// No ticker: retire is called by hand below.
	p.start(time.Hour)
	defer p.stop()
	var wg sync.WaitGroup
	for range 10_000 {
		wg.Add(1)
		p.run(taskFunc(wg.Done))
	}
	wg.Wait()
	idle, _ := waitIdle(p)
	if idle < 1 || idle > 100 {
		t.Fatalf("%d goroutines after 10,000 short jobs, want a few", idle)
	}
	p.retire() // the first period begins: all of them went idle in the one before
	if got, _ := p.counts(); got != idle {
		t.Fatalf("the first retire ended goroutines idle for less than a period: %d idle, want %d", got, idle)
	}
	p.retire()
	if got, _ := p.counts(); got != 0 {
		t.Fatalf("%d goroutines idle through a whole period were kept", got)
	}
	if _, live := waitIdle(p); live != 0 {
		t.Fatalf("%d goroutines left after they were retired", live)
	}
	// Jobs still run after every goroutine was retired.
	wg.Add(1)
	p.run(taskFunc(wg.Done))
	wg.Wait()
}

// A job that ends its goroutine (runtime.Goexit) loses neither the jobs
// waiting behind it nor the pool.
func TestRunnersGoexit(t *testing.T) {
	p := newRunners()
	p.start(time.Hour)
	defer p.stop()
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Add(1)
		p.run(taskFunc(func() {
			defer wg.Done()
			if i%3 == 0 {
				runtime.Goexit()
			}
		}))
	}
	wg.Wait()
	if idle, live := waitIdle(p); live == 0 || idle != live {
		t.Fatalf("%d goroutines, %d idle, after jobs that ended theirs: want some, all idle", live, idle)
	}
}

// stop lets the jobs handed over before it run, and ends every goroutine.
func TestRunnersStop(t *testing.T) {
	before := runtime.NumGoroutine()
	p := newRunners()
	p.start(time.Hour)
	release := make(chan struct{})
	var ran sync.WaitGroup
	ran.Add(3)
	for range 3 {
		p.run(taskFunc(func() { <-release; ran.Done() }))
	}
	close(release)
	p.stop()
	ran.Wait()
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after stop, %d before", runtime.NumGoroutine(), before)
		}
		runtime.Gosched()
	}
}

// waitIdle waits until every goroutine of p is idle (or has ended), or a
// while passed: a goroutine is idle, or gone, a moment after its last job.
func waitIdle(p *runners) (idle, live int) {
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		if idle, live = p.counts(); idle == live || time.Now().After(deadline) {
			return idle, live
		}
	}
}

// Profiler labels a job sets on its goroutine do not outlive the job: the
// goroutine, kept for the next job, carries none once it is idle.
func TestRunnersJobLabelsDoNotOutliveTheJob(t *testing.T) {
	p := newRunners()
	p.start(time.Hour)
	defer p.stop()
	var wg sync.WaitGroup
	wg.Add(1)
	p.run(taskFunc(func() {
		defer wg.Done()
		pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("drover_test_job", "labelled")))
	}))
	wg.Wait()
	if idle, _ := waitIdle(p); idle != 1 {
		t.Fatalf("%d idle goroutines after one job, want 1", idle)
	}
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "drover_test_job") {
		t.Fatalf("an idle runner still carries the labels its last job set:\n%s", b.String())
	}
}
