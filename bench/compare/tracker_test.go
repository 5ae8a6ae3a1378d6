package main

import (
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
	tr.completedSeq(n + 5)        // never handed out: ignored
	lost, dup := tr.verdict()
	if lost != 1 || dup != 1 {
		t.Fatalf("lost, dup = %d, %d; want 1, 1", lost, dup)
	}
	start, fin := tr.latencySamples(0, n)
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
