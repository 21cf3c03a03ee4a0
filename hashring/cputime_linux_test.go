//go:build linux

package hashring

import (
	"runtime"
	"syscall"
	"time"
)

// threadCPU starts measuring the CPU time of the calling goroutine's OS
// thread, which it locks; the returned function unlocks it and reports
// the time consumed. On a machine shared with other work this is the
// benchmark's own cost, where ns/op also counts the time it spent
// waiting for a core.
func threadCPU() (stop func() (time.Duration, bool)) {
	runtime.LockOSThread()
	start, ok := rusageThread()
	return func() (time.Duration, bool) {
		end, ok2 := rusageThread()
		runtime.UnlockOSThread()
		return end - start, ok && ok2
	}
}

func rusageThread() (time.Duration, bool) {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
