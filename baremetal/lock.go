package baremetal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/anvilmetal/anvil/clock"
)

// Defaults of the lock retry policy (reference §5.2:
// node_locked_retry_attempts and node_locked_retry_interval).
const (
	DefaultLockAttempts = 3
	DefaultLockInterval = time.Second
)

// LockPolicy says how AcquireNode retries a node that is locked.
type LockPolicy struct {
	// Attempts is how many reservations are tried in all; values below 1
	// mean DefaultLockAttempts. One attempt means no retry.
	Attempts int
	// Interval is the wait between attempts; 0 means DefaultLockInterval.
	Interval time.Duration
	// Patient retries until the context ends, ignoring Attempts, for
	// finishing transitions that have no other recovery path.
	Patient bool
	// Clock paces the retries; nil means clock.System().
	Clock clock.Clock
}

// DefaultLockPolicy returns Ironic's default: 3 attempts 1 s apart.
func DefaultLockPolicy() LockPolicy {
	return LockPolicy{Attempts: DefaultLockAttempts, Interval: DefaultLockInterval}
}

// NoRetry returns a policy that tries once, as a lookup that must fail
// fast does.
func NoRetry() LockPolicy { return LockPolicy{Attempts: 1} }

// AcquireNode takes node uuid's exclusive lock for holder, retrying only
// while the node is locked by someone else, as the policy says. It
// returns the node as locked. When the budget is spent it returns the last
// *NodeLockedError (naming the holder); when ctx ends first, an error that
// wraps both ctx.Err() and that *NodeLockedError. Other errors (unknown
// node, database failure) are returned at once.
func AcquireNode(ctx context.Context, s ReservationStore, uuid, holder string, p LockPolicy) (*Node, error) {
	attempts := p.Attempts
	if attempts < 1 {
		attempts = DefaultLockAttempts
	}
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultLockInterval
	}
	clk := p.Clock
	if clk == nil {
		clk = clock.System()
	}
	for try := 1; ; try++ {
		n, err := s.ReserveNode(ctx, uuid, holder)
		if err == nil {
			return n, nil
		}
		var locked *NodeLockedError
		if !errors.As(err, &locked) {
			return nil, err
		}
		if !p.Patient && try >= attempts {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("baremetal: waiting for the lock of node %s: %w (%w)", uuid, ctx.Err(), err)
		case <-clk.After(interval):
		}
	}
}
