package vmlab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A cancelled build ends the script's children too, not bash alone, and
// the script's EXIT trap runs: a timed-out IPA ramdisk build left
// debootstrap running into the build directory the cache had removed,
// and its work directory in /tmp.
func TestRunBuildScriptCancelEndsItsChildren(t *testing.T) {
	dir := t.TempDir()
	script := `trap 'echo cleaned > "$1/trap"' EXIT
sleep 1000 &
echo $! > "$1/child.pid"
wait
`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- runBuildScript(ctx, script, dir, dir) }()
	var child int
	for child == 0 {
		select {
		case err := <-errc:
			t.Fatalf("the script ended before it was cancelled: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if b, err := os.ReadFile(filepath.Join(dir, "child.pid")); err == nil && strings.HasSuffix(string(b), "\n") {
			if child, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				t.Fatal(err)
			}
		}
	}
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("a cancelled build returned no error")
		}
	case <-time.After(2 * (buildStopGrace + 5*time.Second)):
		t.Fatal("runBuildScript did not return after its context was cancelled")
	}
	if alive(child) {
		_ = syscall.Kill(child, syscall.SIGKILL)
		t.Fatalf("the script's child %d outlived the cancelled build", child)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "trap")); err != nil || string(b) != "cleaned\n" {
		t.Fatalf("the script's EXIT trap did not run: %q %v", b, err)
	}
}

// alive reports whether pid is a process that has not exited (a zombie
// waiting for its reaper counts as exited).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
