package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// result is one workload on one system. Latencies are in milliseconds.
type result struct {
	Workload string `json:"workload"`
	Param    string `json:"param"`
	System   string `json:"system"`
	Jobs     int64  `json:"jobs"` // jobs the workload enqueued and checked

	InsertPerSec   float64   `json:"insert_jobs_per_sec,omitempty"`
	WorkPerSec     float64   `json:"work_jobs_per_sec,omitempty"`
	InsertSeconds  float64   `json:"insert_seconds,omitempty"`
	WorkSeconds    float64   `json:"work_seconds,omitempty"`
	WorkRounds     []float64 `json:"work_jobs_per_sec_rounds,omitempty"` // --burn-down-rounds: each round's work rate, in run order
	OfferedPerSec  float64   `json:"offered_per_sec,omitempty"`
	AchievedPerSec float64   `json:"achieved_offer_per_sec,omitempty"`
	// burn-down's work and continuous's window: microseconds of CPU a job,
	// this process's (the worker; on SQLite the database too) and the rest of
	// the machine's (on a quiet machine, PostgreSQL). Absent where unread.
	CPUProcessUS float64 `json:"cpu_process_us_per_job,omitempty"`
	CPURestUS    float64 `json:"cpu_rest_us_per_job,omitempty"`

	StartP50  float64 `json:"start_p50_ms,omitempty"`
	StartP99  float64 `json:"start_p99_ms,omitempty"`
	FinishP50 float64 `json:"finish_p50_ms,omitempty"`
	FinishP99 float64 `json:"finish_p99_ms,omitempty"`
	// latency: the p99s counted from when the schedule wanted each insert sent,
	// not from the call (see tracker.enqueuedLate).
	StartP99Sched  float64 `json:"start_p99_from_schedule_ms,omitempty"`
	FinishP99Sched float64 `json:"finish_p99_from_schedule_ms,omitempty"`

	Heap []memSample `json:"heap,omitempty"`

	Lost         int64  `json:"lost"`
	Dup          int64  `json:"dup"`
	DBUnfinished int64  `json:"db_unfinished"` // -1: not checked
	Error        string `json:"error,omitempty"`
}

// memSample is the process's live heap right after a GC the sampler forced
// (runtime/metrics /gc/heap/live:bytes: the objects that GC marked), less what
// the harness's tracker holds on the Go heap (nothing on unix: newTrackChunk),
// at At seconds into the window. Every GC counts as live whatever the program
// allocated while it marked; forcing it makes each sample a GC started at that
// moment rather than wherever the pacer put its trigger. Most of the heap is
// the jobs held and the batch statements' buffers, so it is a working set and
// moves from run to run (HISTORY.md, twenty-fourth session).
type memSample struct {
	At       float64 `json:"at_s"`
	HeapMiB  float64 `json:"heap_live_mib"`
	TrackMiB float64 `json:"tracker_mib"`
	// InFlight is how many jobs had entered their handler and were not yet
	// seen durably finished: the jobs whose memory a sample holds.
	InFlight int64 `json:"in_flight"`
	// RSSMiB is the process's resident anonymous memory (0 where it cannot
	// be read) less the tracker's chunks mapped outside the Go heap (one byte
	// a job: 24 MiB over 24M jobs, which the figure counted as SQLite's until
	// the sixty-third session). It holds SQLite's own allocations
	// (modernc.org/libc's: its page caches, prepared statements) that HeapMiB
	// cannot see. GoMiB is what the Go runtime has mapped, less what it released.
	RSSMiB float64 `json:"rss_mib,omitempty"`
	GoMiB  float64 `json:"go_mib,omitempty"`
	// Held is how many jobs the worker had claimed and not yet seen durably
	// finished (Drover only, from its Observer): in flight, or waiting in the
	// worker for a slot.
	Held int64 `json:"held,omitempty"`
}

type opts struct {
	jobs            int64
	insertBatch     int
	insertWorkers   int
	continuous      time.Duration
	maxPending      int64
	latencyRate     int
	latencyDuration time.Duration
	backlog         []int64
	backlogJobs     int
	backlogFuture   float64
	stall           time.Duration
	latencyCSV      io.Writer    // latency: one row a job (writeLatencyCSV); nil: none
	analyze         func() error // after a burn-down's insert, untimed (nil: none)
}

const msPerNs = 1e-6

func ms(d time.Duration) float64 { return float64(d) * msPerNs }

// waitCompleted waits until target jobs completed, or until none completed for
// stall; it reports whether all did.
func waitCompleted(ctx context.Context, t *tracker, target int64, stall time.Duration) bool {
	last, since := t.completed.Load(), time.Now()
	for {
		c := t.completed.Load()
		if c >= target {
			return true
		}
		if c != last {
			last, since = c, time.Now()
		}
		if time.Since(since) > stall || ctx.Err() != nil {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// finish stops the workers, then fills in the lost/dup verdict and the database's
// own count of unfinished jobs.
func finish(ctx context.Context, s system, t *tracker, r *result, checkDB bool) {
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.stop(sctx); err != nil && r.Error == "" {
		r.Error = "stop: " + err.Error()
	}
	r.Jobs = t.next.Load()
	r.Lost, r.Dup = t.verdict()
	r.DBUnfinished = -1
	if checkDB {
		if n, err := s.unfinished(ctx); err == nil {
			r.DBUnfinished = n
		}
	}
}

// insertAll inserts jobs seqs [0, n) in batches, workers at a time.
func insertAll(ctx context.Context, s system, t *tracker, n int64, batch, workers int) error {
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				failed := firstErr != nil
				mu.Unlock()
				if failed || ctx.Err() != nil {
					return
				}
				k := min(int64(batch), n-next.Load())
				if k <= 0 {
					return
				}
				// reserve and next advance together under the lock, so batches
				// never overlap and never pass n.
				mu.Lock()
				k = min(int64(batch), n-next.Load())
				if k <= 0 {
					mu.Unlock()
					return
				}
				first := t.reserve(int(k))
				next.Add(k)
				mu.Unlock()
				if err := s.insertBatch(ctx, first, int(k)); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("insert: %w", err)
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

func burnDown(ctx context.Context, s system, o opts) result {
	r := result{Workload: "burn-down", Param: fmt.Sprintf("%d jobs", o.jobs), System: s.name(), DBUnfinished: -1}
	t := newTracker(false)
	began := time.Now()
	if err := insertAll(ctx, s, t, o.jobs, o.insertBatch, o.insertWorkers); err != nil {
		r.Error = err.Error()
		return r
	}
	ins := time.Since(began)
	r.InsertSeconds, r.InsertPerSec = ins.Seconds(), float64(o.jobs)/ins.Seconds()
	logf("%s: burn-down: inserted %d in %s (%.0f/s); working", s.name(), o.jobs, ins.Round(time.Millisecond), r.InsertPerSec)
	if o.analyze != nil {
		if err := o.analyze(); err != nil {
			r.Error = "analyze: " + err.Error()
			return r
		}
	}

	w0, cpu0 := time.Now(), sampleCPU()
	if err := s.start(ctx, t); err != nil {
		r.Error = "start: " + err.Error()
		return r
	}
	if !waitCompleted(ctx, t, o.jobs, o.stall) {
		r.Error = fmt.Sprintf("stalled at %d of %d completed", t.completed.Load(), o.jobs)
	}
	r.CPUProcessUS, r.CPURestUS, _ = cpuPerJob(cpu0, sampleCPU(), t.completed.Load())
	if last := t.lastDone.Load(); last != 0 {
		work := time.Unix(0, last).Sub(w0)
		r.WorkSeconds, r.WorkPerSec = work.Seconds(), float64(t.completed.Load())/work.Seconds()
	}
	finish(ctx, s, t, &r, true)
	return r
}

func sampleHeap(t *tracker, since time.Time) memSample {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	// The tracker's chunks that fell back to the Go heap, and its own two
	// arrays of chunk pointers (1 MiB, which the figure counted as the
	// queue's: 9% of a 10 MiB heap, in the denominator of its change).
	tb := t.bytes.Load() + int64(unsafe.Sizeof(*t))
	return memSample{
		At:       time.Since(since).Seconds(),
		HeapMiB:  float64(int64(s[0].Value.Uint64())-tb) / (1 << 20),
		TrackMiB: float64(tb) / (1 << 20),
		RSSMiB:   residentMiB(residentBytes(), t.mapped.Load()),
		GoMiB:    float64(s[1].Value.Uint64()-s[2].Value.Uint64()) / (1 << 20),
		InFlight: t.executed.Load() - t.completed.Load(),
		Held:     max(0, t.claimed.Load()-t.completed.Load()),
	}
}

// residentMiB is the resident anonymous memory rss less the tracker's mapped
// chunks, in MiB; 0 where rss could not be read. A chunk is resident once a
// job of it is counted; continuous, the one workload sampled, hands out
// sequence numbers at most --max-pending (50k) ahead of the counts, under a
// chunk, so at most the newest chunk or two (64 KiB each) are subtracted
// before they are resident.
func residentMiB(rss, mapped int64) float64 {
	if rss <= 0 {
		return 0
	}
	return float64(max(rss-mapped, 1)) / (1 << 20)
}

func continuous(ctx context.Context, s system, o opts) result {
	r := result{Workload: "continuous", Param: o.continuous.String(), System: s.name(), DBUnfinished: -1}
	t := newTracker(false)
	// Prefill up to the pending bound, as riverbench does before it starts its
	// clock, so the workers never start on an empty table.
	if err := insertAll(ctx, s, t, o.maxPending, o.insertBatch, o.insertWorkers); err != nil {
		r.Error = err.Error()
		return r
	}
	if err := s.start(ctx, t); err != nil {
		r.Error = "start: " + err.Error()
		return r
	}
	stop := make(chan struct{})
	var stopOnce sync.Once
	stopAll := func() { stopOnce.Do(func() { close(stop) }) }
	var insErr atomic.Value
	var enqDone sync.WaitGroup
	for range max(1, o.insertWorkers) {
		enqDone.Add(1)
		go func() {
			defer enqDone.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if t.next.Load()-t.completed.Load() >= o.maxPending {
					time.Sleep(time.Millisecond)
					continue
				}
				first := t.reserve(o.insertBatch)
				if err := s.insertBatch(ctx, first, o.insertBatch); err != nil {
					insErr.Store(err)
					// The batch may or may not exist; stop the run loudly.
					stopAll()
					return
				}
			}
		}()
	}

	t0 := time.Now()
	c0, n0 := t.completed.Load(), t.next.Load()
	start := sampleHeap(t, t0)
	start.At = 0 // before the load: the fifths leave it out (it read 2-9 ms after the GC)
	r.Heap = append(r.Heap, start)
	cpu0 := sampleCPU()
	// Sampled every second after a forced GC: a sample holds the jobs in flight
	// at that moment (a claim of 1,000 lands at once), so one sample says little,
	// and the report compares the medians of the window's first and last fifth,
	// 60 samples each (the means of HeapInuse every 2 s moved by ±10% and more
	// between identical runs; the live heap of the pacer's GCs drifted, see
	// memSample).
	tick := time.NewTicker(time.Second)
	end := time.NewTimer(o.continuous)
loop:
	for {
		select {
		case <-tick.C:
			h := sampleHeap(t, t0)
			r.Heap = append(r.Heap, h)
			if len(r.Heap)%10 == 1 {
				logf("%s: continuous: %.0fs: %d completed, %d pending, heap %.1f MiB", s.name(), h.At, t.completed.Load()-c0, t.next.Load()-t.completed.Load(), h.HeapMiB)
			}
		case <-end.C:
			break loop
		case <-stop:
			break loop
		}
	}
	tick.Stop()
	c1, n1, t1 := t.completed.Load(), t.next.Load(), time.Now()
	r.CPUProcessUS, r.CPURestUS, _ = cpuPerJob(cpu0, sampleCPU(), c1-c0)
	r.Heap = append(r.Heap, sampleHeap(t, t0))
	stopAll()
	enqDone.Wait()
	win := t1.Sub(t0)
	r.WorkSeconds, r.WorkPerSec = win.Seconds(), float64(c1-c0)/win.Seconds()
	r.InsertPerSec = float64(n1-n0) / win.Seconds()
	if err, _ := insErr.Load().(error); err != nil {
		r.Error = "insert: " + err.Error()
	}
	logf("%s: continuous: %.0f jobs/s over %s; draining %d", s.name(), r.WorkPerSec, win.Round(time.Millisecond), t.next.Load()-t.completed.Load())
	if !waitCompleted(ctx, t, t.next.Load(), o.stall) && r.Error == "" {
		r.Error = fmt.Sprintf("drain stalled at %d of %d completed", t.completed.Load(), t.next.Load())
	}
	finish(ctx, s, t, &r, true)
	return r
}

func latency(ctx context.Context, s system, o opts) result {
	total := int64(float64(o.latencyRate) * o.latencyDuration.Seconds())
	r := result{
		Workload: "latency", Param: fmt.Sprintf("%d/s for %s", o.latencyRate, o.latencyDuration),
		System: s.name(), OfferedPerSec: float64(o.latencyRate), DBUnfinished: -1,
	}
	t := newTracker(true)
	t.reserve(int(total))
	if err := s.start(ctx, t); err != nil {
		r.Error = "start: " + err.Error()
		return r
	}
	type offer struct {
		seq int64
		due time.Time // when the schedule sends it
	}
	jobs := make(chan offer, 4096)
	var insErr atomic.Value
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				t.enqueuedLate(j.seq, time.Now(), j.due)
				if err := s.insertOne(ctx, j.seq); err != nil {
					insErr.Store(err)
				}
			}
		}()
	}
	interval := time.Second / time.Duration(o.latencyRate)
	logf("%s: latency: offering %d jobs at %d/s", s.name(), total, o.latencyRate)
	t0 := time.Now()
	// The schedule stops at an interrupt: it slept through the rest of the
	// window (30 s by default) while the inserts failed, and the run ignored
	// Ctrl-C, a second one too, until then.
	wait := time.NewTimer(0)
	defer wait.Stop()
offering:
	for i := range total {
		due := t0.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			wait.Reset(d)
			select {
			case <-wait.C:
			case <-ctx.Done():
				break offering
			}
		}
		select {
		case jobs <- offer{i, due}:
		case <-ctx.Done():
			break offering
		}
	}
	close(jobs)
	wg.Wait()
	r.AchievedPerSec = float64(total) / time.Since(t0).Seconds()
	if err, _ := insErr.Load().(error); err != nil {
		r.Error = "insert: " + err.Error()
	}
	if !waitCompleted(ctx, t, total, o.stall) && r.Error == "" {
		r.Error = fmt.Sprintf("stalled at %d of %d completed", t.completed.Load(), total)
	}
	if o.latencyCSV != nil {
		if err := writeLatencyCSV(o.latencyCSV, s.name(), t, total, interval); err != nil && r.Error == "" {
			r.Error = "--latency-csv: " + err.Error()
		}
	}
	start, fin := t.latencySamples(0, total, false)
	r.StartP50, r.StartP99 = ms(percentile(start, 50)), ms(percentile(start, 99))
	r.FinishP50, r.FinishP99 = ms(percentile(fin, 50)), ms(percentile(fin, 99))
	start, fin = t.latencySamples(0, total, true)
	r.StartP99Sched, r.FinishP99Sched = ms(percentile(start, 99)), ms(percentile(fin, 99))
	finish(ctx, s, t, &r, true)
	return r
}

// backlogBlock jobs of one size are measured back to back, after
// backlogWarmup more that are not, between its worker's start and its stop.
const (
	backlogBlock  = 100
	backlogWarmup = 10
)

// backlog gives each size a table of its own (the system, then a twin of it in
// a schema of its own for each larger size) and seeds them (rows that are not
// measured). Then it takes the sizes in turn, a block at a time: start that
// size's workers, run backlogWarmup + backlogBlock jobs one at a time —
// enqueue, wait for its completion, next — and stop them, until every size has
// run --backlog-jobs measured jobs. It reports enqueue→start (the claim) and
// enqueue→finish latencies per size, over every block's measured jobs.
//
// The sizes are interleaved, not measured one after another, because the
// machine drifts: a p50 over one size's 1,000 jobs (~1.5 s) moved by ±15% from
// one run to the next with nothing changed (the fiftieth session's standalone
// runs: 0.87–1.43 ms at 10k rows), and a ratio of two such p50s taken minutes
// apart missed 1.3× in three full runs of fourteen on drift alone. In blocks a
// fraction of a second long, drift moves every size alike and the ratio keeps
// what the table's size does.
//
// Only the size being measured has its workers running: with every size's
// running at once, the idle ones' maintenance loops (three engines' reapers,
// reconcilers and leases; River's services) raised the p99 of every size to
// 3.4–8.0 ms, against 1.6–2.7 ms at 10k and 1M rows one at a time (fifty-first
// session). The warm-up of each block keeps the start of a worker (its
// listener, its first claim) out of the figures.
func backlog(ctx context.Context, s system, o opts, settleFn func() error) []result {
	sd, ok := s.(seeder)
	if !ok {
		return nil
	}
	tw, ok := s.(twinner)
	if !ok {
		return nil
	}
	sizes := slices.Clone(o.backlog)
	slices.Sort(sizes)
	out := make([]result, len(sizes))
	for i, size := range sizes {
		out[i] = result{Workload: "backlog", Param: fmt.Sprintf("%d rows", size), System: s.name(), DBUnfinished: -1}
	}
	// fail marks every size: one whose measurement another's failure cut short
	// is no figure either.
	fail := func(i int, msg string) []result {
		for j := range out {
			if j == i {
				out[j].Error = msg
			} else if out[j].Error == "" {
				out[j].Error = fmt.Sprintf("%s failed: %s", out[i].Param, msg)
			}
		}
		return out
	}

	insts := make([]system, len(sizes))
	insts[0] = s
	defer func() {
		for _, in := range insts[1:] {
			if in != nil {
				in.close()
			}
		}
	}()
	for i, size := range sizes {
		if i > 0 {
			insts[i] = tw.twin(fmt.Sprintf("_%d", size))
			if err := insts[i].reset(ctx); err != nil {
				return fail(i, "reset: "+err.Error())
			}
			sd = insts[i].(seeder)
		}
		future := int64(float64(size) * o.backlogFuture)
		began := time.Now()
		if err := sd.seed(ctx, size-future, future); err != nil {
			return fail(i, "seed: "+err.Error())
		}
		logf("%s: backlog: seeded %d rows (%d waiting far in the future) in %s", s.name(), size, future, time.Since(began).Round(time.Millisecond))
	}
	if err := settleFn(); err != nil {
		return fail(0, err.Error())
	}

	blocks := (int64(o.backlogJobs) + backlogBlock - 1) / backlogBlock
	ts := make([]*tracker, len(insts))
	for i := range ts {
		ts[i] = newTracker(true)
		ts[i].watch = make(chan int64, 64)
		ts[i].reserve(int(blocks*backlogWarmup) + o.backlogJobs)
	}
	var measured [][2]int64 // each block's measured seqs [from, to), alike for every size
	var next int64
	for b := range blocks {
		end := next + backlogWarmup + min(backlogBlock, int64(o.backlogJobs)-b*backlogBlock)
		measured = append(measured, [2]int64{next + backlogWarmup, end})
		// Each block starts at a different size, so that none always follows
		// the same other.
		for k := range insts {
			i := (int(b) + k) % len(insts)
			if err := backlogBlockRun(ctx, insts[i], ts[i], next, end, o.stall); err != nil {
				return fail(i, err.Error())
			}
		}
		next = end
	}
	for i := range insts {
		var start, fin []time.Duration
		for _, m := range measured {
			st, fi := ts[i].latencySamples(m[0], m[1], false)
			start, fin = append(start, st...), append(fin, fi...)
		}
		r := &out[i]
		r.StartP50, r.StartP99 = ms(percentile(start, 50)), ms(percentile(start, 99))
		r.FinishP50, r.FinishP99 = ms(percentile(fin, 50)), ms(percentile(fin, 99))
		r.Jobs = int64(o.backlogJobs)
		r.Lost, r.Dup = ts[i].verdict()
		logf("%s: backlog %s: enqueue→start p50 %.2f ms p99 %.2f ms", s.name(), r.Param, r.StartP50, r.StartP99)
	}
	return out
}

// backlogBlockRun starts s's workers, runs the jobs seqs [first, end) one at a
// time, and stops the workers.
func backlogBlockRun(ctx context.Context, s system, t *tracker, first, end int64, stall time.Duration) (err error) {
	if err := s.start(ctx, t); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if serr := s.stop(sctx); err == nil && serr != nil {
			err = fmt.Errorf("stop: %w", serr)
		}
	}()
	for seq := first; seq < end; seq++ {
		t.enqueued(seq, time.Now())
		if err := s.insertOne(ctx, seq); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		timeout := time.After(stall)
	wait:
		for {
			select {
			case got := <-t.watch:
				if got == seq {
					break wait
				}
			case <-timeout:
				return fmt.Errorf("job %d not completed within %s", seq, stall)
			}
		}
	}
	return nil
}

const latencyCSVHeader = "system,seq,due_ms,late_ms,start_ms,finish_ms,enqueued_unix_ns\n"

// writeLatencyCSV writes a row for each of the latency workload's jobs: when
// the schedule wanted its insert sent (due_ms, from the workload's start), how
// late the insert call began (late_ms), its enqueue→start and enqueue→finish
// latencies (start_ms, finish_ms; 0: never seen) and the wall clock at its
// enqueue, so the slow jobs can be placed in time: a stall that comes once a
// second shows as the slow jobs' enqueued_unix_ns sharing a phase of the second
// (the forty-second session's repair walk, HISTORY.md).
func writeLatencyCSV(w io.Writer, system string, t *tracker, total int64, interval time.Duration) error {
	bw := bufio.NewWriter(w)
	for s := int64(0); s < total; s++ {
		tc := t.times[s>>chunkBits].Load()
		if tc == nil {
			continue
		}
		i := s & (chunkSize - 1)
		fmt.Fprintf(bw, "%s,%d,%.3f,%.3f,%.3f,%.3f,%d\n", system, s, ms(time.Duration(s)*interval),
			ms(time.Duration(tc.late[i].Load())), ms(time.Duration(tc.start[i].Load())),
			ms(time.Duration(tc.finish[i].Load())), tc.enq[i].Load())
	}
	return bw.Flush()
}
