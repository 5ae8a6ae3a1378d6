package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// cpuSample is the CPU time this process and the whole machine had used at one
// instant. Two samples around a workload's window say where its CPU went: the
// harness process holds the system's worker (and, on SQLite, its database),
// and the rest of the machine is, on a quiet machine with a local PostgreSQL,
// the database server.
type cpuSample struct {
	proc    time.Duration // this process, user + system
	machine time.Duration // every CPU's busy time (/proc/stat), 0 if unread
	ok      bool          // both were read
}

func sampleCPU() cpuSample {
	proc, okP := processCPU()
	machine, okM := machineBusy()
	return cpuSample{proc: proc, machine: machine, ok: okP && okM}
}

// cpuPerJob answers the microseconds of CPU a job took between a and b in this
// process and in the rest of the machine; ok is false where either sample was
// not read or no job completed.
func cpuPerJob(a, b cpuSample, jobs int64) (proc, rest float64, ok bool) {
	if !a.ok || !b.ok || jobs <= 0 {
		return 0, 0, false
	}
	p := (b.proc - a.proc).Seconds() * 1e6 / float64(jobs)
	m := (b.machine - a.machine).Seconds() * 1e6 / float64(jobs)
	// /proc/stat counts in clock ticks, the process in microseconds: over a
	// short window the machine's figure can come out a tick below the
	// process's.
	return p, max(0, m-p), true
}

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux ABI Go
// supports (sysconf(_SC_CLK_TCK) needs cgo).
const clockTicks = 100

// machineBusy reads the busy time of every CPU from /proc/stat: user, nice,
// system, irq and softirq. Idle, iowait and steal (time the hypervisor gave
// another guest) are not this machine's work.
func machineBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	return parseProcStat(b)
}

func parseProcStat(b []byte) (time.Duration, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 8 || string(f[0]) != "cpu" {
			continue
		}
		var busy uint64
		for _, i := range []int{1, 2, 3, 6, 7} { // user nice system irq softirq
			v, err := strconv.ParseUint(string(f[i]), 10, 64)
			if err != nil {
				return 0, false
			}
			busy += v
		}
		return time.Duration(busy) * time.Second / clockTicks, true
	}
	return 0, false
}

// fmtCPU is a result's CPU a job as the table shows it.
func fmtCPU(proc, rest float64) string {
	return fmt.Sprintf("%.1f + %.1f", proc, rest)
}

// cpuMetric names the table's CPU row; cpuNote, printed under the table, says
// what it counts.
const (
	cpuMetric = "CPU µs/job: process + rest"
	cpuNote   = "CPU µs/job: CPU time a job over the workload's window, this process's (the system's worker; on SQLite its database too) + the rest of the machine's busy time (/proc/stat; on a quiet machine, PostgreSQL)."
)
