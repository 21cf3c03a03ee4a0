// Package procstat reads what Linux's /proc says about a process (its
// state, parent, process group, CPU time and peak memory) and what
// getrusage says about this one, for the benchmarks that report CPU and
// memory and for the tests and the console manager that follow child
// processes by PID.
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Stat is the part of /proc/<pid>/stat Anvil uses.
type Stat struct {
	// State is the one-letter state: 'R', 'S', 'Z' (zombie), 'X' (dead)...
	State byte
	PPID  int
	PGRP  int
	// CPU is user plus system time (utime + stime).
	CPU time.Duration
}

// clockTick is the unit of utime and stime: USER_HZ, 100 on every Linux
// ABI Go supports.
const clockTick = 10 * time.Millisecond

// Read parses /proc/<pid>/stat. The command name may hold spaces and
// parentheses, so the fields are counted after its last ')'.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("procstat: /proc/%d/stat: no command name", pid)
	}
	// After the name: state(3) ppid(4) pgrp(5) ... utime(14) stime(15).
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("procstat: /proc/%d/stat: %d fields after the name", pid, len(f))
	}
	var n [4]int64
	for k, idx := range []int{1, 2, 11, 12} {
		if n[k], err = strconv.ParseInt(string(f[idx]), 10, 64); err != nil {
			return Stat{}, fmt.Errorf("procstat: /proc/%d/stat: field %d: %w", pid, idx+3, err)
		}
	}
	return Stat{State: f[0][0], PPID: int(n[0]), PGRP: int(n[1]), CPU: time.Duration(n[2]+n[3]) * clockTick}, nil
}

// Alive reports whether pid is a process that has not exited (a zombie
// has).
func (s Stat) Alive() bool { return s.State != 'Z' && s.State != 'X' }

// PeakRSSMiB reads the process's peak resident set (VmHWM) from
// /proc/<pid>/status.
func PeakRSSMiB(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kib, err := strconv.ParseFloat(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))), 64)
			if err != nil {
				return 0, fmt.Errorf("procstat: /proc/%d/status: VmHWM: %w", pid, err)
			}
			return kib / 1024, nil
		}
	}
	return 0, fmt.Errorf("procstat: /proc/%d/status has no VmHWM", pid)
}

// CPUWait is how long the threads of process pid have waited, runnable,
// for a CPU (the second field of /proc/<pid>/task/<tid>/schedstat, summed
// over the threads alive now: a thread that exited is not counted). On a
// machine whose other processes keep every CPU busy it grows while the
// process's CPU time does not: the process was starved, not idle.
func CPUWait(pid int) (time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var total time.Duration
	read := 0
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited meanwhile
		}
		_, wait, err := parseSchedstat(b)
		if err != nil {
			return 0, fmt.Errorf("procstat: %s/%s/schedstat: %w", dir, e.Name(), err)
		}
		total += wait
		read++
	}
	if read == 0 {
		return 0, fmt.Errorf("procstat: %s: no thread's schedstat could be read", dir)
	}
	return total, nil
}

// parseSchedstat parses a schedstat line: time on a CPU, time waiting on
// a run queue (both in nanoseconds), and time slices run.
func parseSchedstat(b []byte) (run, wait time.Duration, err error) {
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("%d fields, want 3", len(f))
	}
	var n [2]int64
	for i := range n {
		if n[i], err = strconv.ParseInt(string(f[i]), 10, 64); err != nil {
			return 0, 0, err
		}
	}
	return time.Duration(n[0]), time.Duration(n[1]), nil
}
