package ipmisim

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind (an
// ipmitool process nobody waits for, a simulator watcher).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
