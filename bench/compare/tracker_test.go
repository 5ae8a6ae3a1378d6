package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseSeq(t *testing.T) {
	for in, want := range map[string]int64{
		`{"seq":42}`: 42, `{"seq": 7}`: 7, `{"seq": 0}`: 0, `{"a": 1, "seq": 123456789}`: 123456789,
		`{"seq": 5, "b": 2}`: 5, `{"seq":"x"}`: -1, `{}`: 0,
	} {
		if got := parseSeq([]byte(in)); got != want {
			t.Errorf("parseSeq(%s) = %d, want %d", in, got, want)
		}
	}
}

func TestTrackerVerdict(t *testing.T) {
	tr := newTracker(true)
	first := tr.reserve(chunkSize + 10) // spans two chunks
	if first != 0 {
		t.Fatalf("first = %d", first)
	}
	n := tr.next.Load()
	for s := range n {
		tr.enqueued(s, time.Now())
		if s == 3 {
			continue // lost
		}
		tr.executedSeq(s)
		tr.completedSeq(s)
	}
	tr.executedSeq(chunkSize + 1) // ran twice
	tr.completedSeq(n + 5)        // never handed out: a run it cannot place
	tr.executedSeq(-1)            // args that did not parse: the same
	lost, dup := tr.verdict()
	if lost != 1 || dup != 3 {
		t.Fatalf("lost, dup = %d, %d; want 1, 3 (one ran twice, two stray)", lost, dup)
	}
	start, fin := tr.latencySamples(0, n, false)
	if len(start) != int(n-1) || len(fin) != int(n-1) {
		t.Fatalf("samples %d/%d, want %d", len(start), len(fin), n-1)
	}
	// Saturation: 20 executions stay counted as more than one.
	for range 20 {
		tr.executedSeq(5)
	}
	if e, d := tr.get(5); e != 15 || d != 1 {
		t.Fatalf("seq 5: %d executions, %d completions", e, d)
	}
}

// TestTrackerScheduleLatency: a job whose insert went out late against its
// schedule counts the delay only in the samples from the schedule.
func TestTrackerScheduleLatency(t *testing.T) {
	tr := newTracker(true)
	tr.reserve(2)
	at := time.Now().Add(-time.Hour)               // start latencies of about an hour
	tr.enqueuedLate(0, at, at)                     // on time
	tr.enqueuedLate(1, at, at.Add(-3*time.Second)) // sent 3s after it was due
	for s := range int64(2) {
		tr.executedSeq(s)
		tr.completedSeq(s)
	}
	call, _ := tr.latencySamples(0, 2, false)
	sched, fin := tr.latencySamples(0, 2, true)
	if len(call) != 2 || len(sched) != 2 || len(fin) != 2 {
		t.Fatalf("samples %d/%d/%d, want 2 each", len(call), len(sched), len(fin))
	}
	if d := sched[0] - call[0]; d != 0 {
		t.Errorf("on-time job: from schedule %v, from the call %v; want equal", sched[0], call[0])
	}
	if d := sched[1] - call[1]; d != 3*time.Second {
		t.Errorf("late job: from schedule − from the call = %v, want 3s", d)
	}
	if fin[1] < sched[1] {
		t.Errorf("late job: finish %v before start %v, both from the schedule", fin[1], sched[1])
	}
}

// The latency CSV has a row a job, in sequence order, with its lateness and
// its latencies, and 0 for a latency never seen.
func TestWriteLatencyCSV(t *testing.T) {
	tr := newTracker(true)
	tr.reserve(2)
	at := time.Now().Add(-time.Hour)
	tr.enqueuedLate(0, at, at.Add(-2*time.Millisecond))
	tr.enqueuedLate(1, at, at)
	tr.executedSeq(0) // job 1 never starts
	var b strings.Builder
	if err := writeLatencyCSV(&b, "drover", tr, 2, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2:\n%s", len(rows), b.String())
	}
	enq := strconv.FormatInt(at.UnixNano(), 10)
	f0 := strings.Split(rows[0], ",")
	if f0[0] != "drover" || f0[1] != "0" || f0[2] != "0.000" || f0[3] != "2.000" || f0[5] != "0.000" || f0[6] != enq {
		t.Errorf("row 0 = %q", rows[0])
	}
	if start, err := strconv.ParseFloat(f0[4], 64); err != nil || start < 3.6e6 {
		t.Errorf("row 0's start_ms = %q, want about an hour", f0[4])
	}
	if want := "drover,1,1.000,0.000,0.000,0.000," + enq; rows[1] != want {
		t.Errorf("row 1 = %q, want %q", rows[1], want)
	}
	if n := len(strings.Split(strings.TrimSuffix(latencyCSVHeader, "\n"), ",")); n != len(f0) {
		t.Errorf("the header has %d columns, a row %d", n, len(f0))
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i))
	}
	if p := percentile(ds, 50); p != 50 {
		t.Errorf("p50 = %d", p)
	}
	if p := percentile(ds, 99); p != 99 {
		t.Errorf("p99 = %d", p)
	}
	if p := percentile(nil, 99); p != 0 {
		t.Errorf("empty p99 = %d", p)
	}
}
