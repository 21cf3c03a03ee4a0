//go:build unix

package agentclient_test

import (
	"syscall"
	"testing"
)

// ensureFDs makes sure the process may hold need open file descriptors,
// raising the soft RLIMIT_NOFILE towards the hard one when it is lower,
// and skips the test when even the hard limit is too low.
func ensureFDs(tb testing.TB, need uint64) {
	tb.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Skipf("skipping: cannot read RLIMIT_NOFILE: %v", err)
	}
	if lim.Cur >= need {
		return
	}
	if lim.Max < need {
		tb.Skipf("skipping: needs %d file descriptors, RLIMIT_NOFILE hard limit is %d", need, lim.Max)
	}
	old := lim.Cur
	lim.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Skipf("skipping: needs %d file descriptors, cannot raise RLIMIT_NOFILE from %d: %v", need, old, err)
	}
}
