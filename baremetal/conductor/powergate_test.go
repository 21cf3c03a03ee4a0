package conductor_test

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/anvilmetal/anvil/driver/fake"
)

// powerGate holds the fake driver's power actions once armed: every
// set_power_state after arm() waits until release(), and started gets a
// value when the first of them begins, so a test can fill the
// conductor's workers with power actions at a moment it chooses.
type powerGate struct {
	armed   atomic.Bool
	started chan struct{}
	unblock chan struct{}
}

func newPowerGate() *powerGate {
	return &powerGate{started: make(chan struct{}, 1), unblock: make(chan struct{})}
}

func (g *powerGate) arm()     { g.armed.Store(true) }
func (g *powerGate) release() { close(g.unblock) }

// config is a fake.Config whose power actions pass through the gate.
func (g *powerGate) config() fake.Config {
	return fake.Config{
		Delays: map[string]time.Duration{"power.set_power_state": time.Nanosecond},
		Sleep: func(ctx context.Context, _ time.Duration) error {
			if !g.armed.Load() {
				return nil
			}
			select {
			case g.started <- struct{}{}:
			default:
			}
			select {
			case <-g.unblock:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	}
}
