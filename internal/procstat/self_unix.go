//go:build unix

package procstat

import (
	"syscall"
	"time"
)

// SelfCPU is this process's user plus system time (getrusage), 0 when
// it cannot be read.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// SelfPeakRSSMiB is this process's peak resident set (getrusage; Linux
// reports KiB), 0 when it cannot be read.
func SelfPeakRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}
