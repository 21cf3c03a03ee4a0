package procstat

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestReadSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: procstat reads Linux's /proc")
	}
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) { // burn some CPU
	}
	s, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.PPID != os.Getppid() || !s.Alive() || s.PGRP == 0 || s.CPU <= 0 {
		t.Fatalf("stat %+v, want ppid %d, alive, a group and CPU time", s, os.Getppid())
	}
	if rss, err := PeakRSSMiB(os.Getpid()); err != nil || rss <= 0 {
		t.Fatalf("peak RSS %v, %v", rss, err)
	}
	if SelfCPU() <= 0 || SelfPeakRSSMiB() <= 0 {
		t.Fatalf("self CPU %v, peak RSS %v", SelfCPU(), SelfPeakRSSMiB())
	}
	if _, err := Read(-1); err == nil {
		t.Fatal("Read(-1) succeeded")
	}
}

func TestParseSchedstat(t *testing.T) {
	run, wait, err := parseSchedstat([]byte("1931456321 12346479529 2195\n"))
	if err != nil || run != 1931456321 || wait != 12346479529 {
		t.Fatalf("parseSchedstat = %v, %v, %v; want 1.931456321s, 12.346479529s", run, wait, err)
	}
	for _, bad := range []string{"", "12", "x 12 3", "12 y 3"} {
		if _, _, err := parseSchedstat([]byte(bad)); err == nil {
			t.Errorf("parseSchedstat(%q) succeeded", bad)
		}
	}
}

// TestCPUWaitOversubscribed runs two more spinning threads than the
// machine has CPUs for a moment: some of them must wait for a CPU, and
// CPUWait must see it.
func TestCPUWaitOversubscribed(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc: procstat reads Linux's /proc")
	}
	before, err := CPUWait(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	threads := runtime.NumCPU() + 2
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads))
	var wg sync.WaitGroup
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			deadline := time.Now().Add(200 * time.Millisecond)
			for time.Now().Before(deadline) {
			}
		}()
	}
	wg.Wait()
	after, err := CPUWait(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("CPU wait %v before and %v after %d threads spun on %d CPUs", before, after, threads, runtime.NumCPU())
	}
}
