package main

import (
	"testing"
	"time"
)

// TestParseProcStat: busy is user + nice + system + irq + softirq of the
// machine's line, in ticks of 10 ms; idle, iowait and steal are left out.
func TestParseProcStat(t *testing.T) {
	stat := "cpu  100 20 30 5000 70 4 6 900 0 0\ncpu0 50 10 15 2500 35 2 3 450 0 0\nintr 1 2 3\n"
	got, ok := parseProcStat([]byte(stat))
	if want := 160 * 10 * time.Millisecond; !ok || got != want {
		t.Fatalf("parseProcStat = %v, %v; want %v, true", got, ok, want)
	}
	for _, bad := range []string{"", "intr 1 2\n", "cpu  1 2 x 4 5 6 7 8\n", "cpu  1 2 3\n"} {
		if _, ok := parseProcStat([]byte(bad)); ok {
			t.Errorf("parseProcStat(%q) read a figure", bad)
		}
	}
}

func TestCPUPerJob(t *testing.T) {
	a := cpuSample{proc: time.Second, machine: 10 * time.Second, ok: true}
	b := cpuSample{proc: 3 * time.Second, machine: 15 * time.Second, ok: true}
	proc, rest, ok := cpuPerJob(a, b, 100_000)
	if !ok || proc != 20 || rest != 30 {
		t.Fatalf("cpuPerJob = %v, %v, %v; want 20, 30, true (2 s and 3 s over 100k jobs)", proc, rest, ok)
	}
	// The machine's ticks can trail the process's microseconds: rest is never negative.
	if _, rest, _ := cpuPerJob(a, cpuSample{proc: 2 * time.Second, machine: 10*time.Second + 900*time.Millisecond, ok: true}, 10); rest != 0 {
		t.Errorf("rest = %v, want 0", rest)
	}
	for _, c := range []struct {
		a, b cpuSample
		jobs int64
	}{{a, b, 0}, {cpuSample{}, b, 10}, {a, cpuSample{}, 10}} {
		if _, _, ok := cpuPerJob(c.a, c.b, c.jobs); ok {
			t.Errorf("cpuPerJob(%+v, %+v, %d) answered", c.a, c.b, c.jobs)
		}
	}
}

// TestSampleCPUCountsThisProcess: 50 ms of this process's CPU shows in the
// machine's busy time too (less a tick or two: /proc/stat counts in 10 ms).
func TestSampleCPUCountsThisProcess(t *testing.T) {
	a := sampleCPU()
	if !a.ok {
		t.Skip("no /proc/stat or getrusage here")
	}
	deadline := time.Now().Add(30 * time.Second)
	b := a
	for b.proc-a.proc < 50*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("process CPU grew by %v in 30 s of a busy loop", b.proc-a.proc)
		}
		for x := 0; x < 1_000_000; x++ {
			_ = x
		}
		b = sampleCPU()
	}
	if d := b.machine - a.machine; d < 30*time.Millisecond {
		t.Fatalf("machine busy time grew by %v while this process used %v", d, b.proc-a.proc)
	}
}
