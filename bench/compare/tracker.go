package main

import (
	"bytes"
	"encoding/json"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// tracker follows every job of one run by its sequence number (carried in the
// job's args as {"seq": N}): how many times its handler ran and how many times its
// completion was seen durable. It keeps one byte per job (low nibble: executions,
// high nibble: completions, both saturating at 15) in chunks allocated as sequence
// numbers are handed out (outside the Go heap where it can: newTrackChunk), so 5M
// jobs cost 5 MiB and nothing is kept per job beyond that; enqueue times are kept
// only when latencies are wanted.
type tracker struct {
	chunks [maxChunks]atomic.Pointer[trackChunk]
	times  [maxChunks]atomic.Pointer[timeChunk] // only with latencies
	mu     sync.Mutex                           // allocates chunks

	latencies bool
	next      atomic.Int64 // sequence numbers handed out
	executed  atomic.Int64 // handler entries
	claimed   atomic.Int64 // jobs a worker said it claimed (Drover only: its Observer)
	completed atomic.Int64 // durable completions
	lastDone  atomic.Int64 // unix nanos of the latest completion
	bytes     atomic.Int64 // Go heap held by the chunks (see newTrackChunk)
	mapped    atomic.Int64 // anonymous memory mapped for the chunks outside the Go heap
	stray     atomic.Int64 // executions or completions of no sequence handed out (unparsable args)

	// watch, when set, gets the sequence number of every completion (non-blocking).
	watch chan int64
}

const (
	chunkBits = 16
	chunkSize = 1 << chunkBits // sequence numbers per chunk
	maxChunks = 1 << 16        // 4G sequence numbers
)

type trackChunk [chunkSize / 4]atomic.Uint32 // 4 jobs a word

// timeChunk holds, per job, the enqueue time, the start and finish latencies,
// and how late the enqueue was sent against an open-loop schedule (latency).
type timeChunk struct {
	enq, start, finish, late [chunkSize]atomic.Int64
}

func newTracker(latencies bool) *tracker { return &tracker{latencies: latencies} }

// reserve hands out n consecutive sequence numbers, allocating their chunks.
func (t *tracker) reserve(n int) (first int64) {
	first = t.next.Add(int64(n)) - int64(n)
	for c := first >> chunkBits; c <= (first+int64(n)-1)>>chunkBits; c++ {
		t.ensure(c)
	}
	return first
}

func (t *tracker) ensure(c int64) {
	if t.chunks[c].Load() != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.chunks[c].Load() != nil {
		return
	}
	ch, onHeap := newTrackChunk()
	t.chunks[c].Store(ch)
	if onHeap {
		t.bytes.Add(int64(unsafe.Sizeof(trackChunk{})))
	} else {
		t.mapped.Add(int64(unsafe.Sizeof(trackChunk{})))
	}
	if t.latencies {
		t.times[c].Store(new(timeChunk))
		t.bytes.Add(int64(unsafe.Sizeof(timeChunk{})))
	}
}

// add adds d to the nibble of seq selected by shift (0: executions, 4: completions).
func (t *tracker) add(seq int64, shift uint) (before uint32, ok bool) {
	if seq < 0 || seq >= t.next.Load() {
		return 0, false
	}
	ch := t.chunks[seq>>chunkBits].Load()
	if ch == nil {
		return 0, false
	}
	i := seq & (chunkSize - 1)
	w := &ch[i/4]
	sh := uint(i%4)*8 + shift
	for {
		old := w.Load()
		n := (old >> sh) & 0xf
		if n == 0xf {
			return n, true
		}
		if w.CompareAndSwap(old, old+(1<<sh)) {
			return n, true
		}
	}
}

func (t *tracker) get(seq int64) (execs, dones uint32) {
	ch := t.chunks[seq>>chunkBits].Load()
	if ch == nil {
		return 0, 0
	}
	i := seq & (chunkSize - 1)
	b := (ch[i/4].Load() >> (uint(i%4) * 8)) & 0xff
	return b & 0xf, b >> 4
}

// enqueued records the client's clock just before the job's insert was sent.
func (t *tracker) enqueued(seq int64, at time.Time) {
	if tc := t.times[seq>>chunkBits].Load(); tc != nil {
		tc.enq[seq&(chunkSize-1)].Store(at.UnixNano())
	}
}

// enqueuedLate is enqueued for a job offered on a schedule: due is when the
// schedule wanted its insert sent. The delay at - due (a busy inserter, a late
// timer) is what an open-loop client's job waits before the call even starts,
// and latencySamples(…, true) counts it, so a stall is not hidden by the
// requests it held back (coordinated omission).
func (t *tracker) enqueuedLate(seq int64, at, due time.Time) {
	t.enqueued(seq, at)
	if tc := t.times[seq>>chunkBits].Load(); tc != nil {
		tc.late[seq&(chunkSize-1)].Store(max(0, int64(at.Sub(due))))
	}
}

// executedSeq is called by a handler when it starts; it returns nothing, the
// handler returns success at once (a no-op job).
func (t *tracker) executedSeq(seq int64) {
	now := time.Now()
	if _, ok := t.add(seq, 0); !ok {
		t.stray.Add(1)
		return
	}
	t.executed.Add(1)
	if tc := t.times[seq>>chunkBits].Load(); tc != nil {
		i := seq & (chunkSize - 1)
		if e := tc.enq[i].Load(); e != 0 {
			tc.start[i].CompareAndSwap(0, now.UnixNano()-e)
		}
	}
}

// completedSeq is called once a job's successful completion is durable.
func (t *tracker) completedSeq(seq int64) {
	now := time.Now()
	if _, ok := t.add(seq, 4); !ok {
		t.stray.Add(1)
		return
	}
	if tc := t.times[seq>>chunkBits].Load(); tc != nil {
		i := seq & (chunkSize - 1)
		if e := tc.enq[i].Load(); e != 0 {
			tc.finish[i].CompareAndSwap(0, now.UnixNano()-e)
		}
	}
	t.lastDone.Store(now.UnixNano())
	t.completed.Add(1)
	if t.watch != nil {
		select {
		case t.watch <- seq:
		default:
		}
	}
}

// verdict counts, over every sequence number handed out, the jobs never completed,
// or completed without their handler ever running (lost), and the jobs whose
// handler ran more than once or whose completion was seen more than once
// (dup). An execution or completion of no sequence handed out (args that did
// not parse) counts as a dup: it is a run the tracker cannot place, and
// dropping it could hide one. A completion with no execution counted as
// neither, so a queue that reported jobs done without running them passed
// (helper-81).
func (t *tracker) verdict() (lost, dup int64) {
	dup = t.stray.Load()
	n := t.next.Load()
	for s := int64(0); s < n; s++ {
		e, d := t.get(s)
		if d == 0 || e == 0 {
			lost++
		}
		if e > 1 || d > 1 {
			dup++
		}
	}
	return lost, dup
}

// latencySamples returns the start and finish latencies of seqs [from, to) that
// have them: from the insert call, or with fromSchedule from the time the
// schedule wanted it sent (see enqueuedLate).
func (t *tracker) latencySamples(from, to int64, fromSchedule bool) (start, finish []time.Duration) {
	for s := from; s < to; s++ {
		tc := t.times[s>>chunkBits].Load()
		if tc == nil {
			continue
		}
		i := s & (chunkSize - 1)
		var late int64
		if fromSchedule {
			late = tc.late[i].Load()
		}
		if v := tc.start[i].Load(); v != 0 {
			start = append(start, time.Duration(v+late))
		}
		if v := tc.finish[i].Load(); v != 0 {
			finish = append(finish, time.Duration(v+late))
		}
	}
	return start, finish
}

// percentile returns the p-th percentile (0 < p ≤ 100, nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p/100*float64(len(s))+0.999999) - 1
	rank = max(0, min(rank, len(s)-1))
	return s[rank]
}

// parseSeq reads N from args {"seq": N} without a full JSON decode (the hot path
// of every completion); anything unexpected falls back to encoding/json.
func parseSeq(args []byte) int64 {
	if i := bytes.Index(args, []byte(`"seq"`)); i >= 0 {
		j := i + 5
		for j < len(args) && (args[j] == ' ' || args[j] == ':') {
			j++
		}
		var n int64
		k := j
		for k < len(args) && args[k] >= '0' && args[k] <= '9' {
			n = n*10 + int64(args[k]-'0')
			k++
		}
		if k > j && k < len(args) && (args[k] == '}' || args[k] == ',' || args[k] == ' ') {
			return n
		}
	}
	var a seqArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return -1
	}
	return a.Seq
}

// seqArgs are the args of every benchmark job.
type seqArgs struct {
	Seq int64 `json:"seq"`
}
