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
