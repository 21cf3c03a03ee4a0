package procstat

import (
	"os"
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
