package rfdriver

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind (an
// unclosed pool, connection or poller).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
