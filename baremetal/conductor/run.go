package conductor

import (
	"context"
	"errors"
	"fmt"
)

// Run launches the conductor (see Launch), serves until ctx ends, and then
// drains it (see Drain) within Options.DrainTimeout; it returns nil after a
// clean shutdown, the error of Launch if the conductor could not start, or
// the error of the drain. It also returns nil, without draining, when Stop
// or Drain was called by someone else meanwhile.
func (c *Conductor) Run(ctx context.Context) error {
	if err := c.Launch(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-c.stopCh:
		return nil
	}
	grace := c.opts.DrainTimeout
	if grace < 0 {
		// No grace period: cancel the running operations at once.
		done, cancel := context.WithCancel(context.WithoutCancel(ctx))
		cancel()
		return c.Stop(done)
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := c.Drain(dctx)
	if errors.Is(err, ErrConductorNotRunning) {
		return nil // stopped by someone else while Run was waking up
	}
	if err != nil && c.running.Load() {
		// The drain could not even begin (the store refused to mark the
		// conductor offline): stop anyway, so nothing is left running.
		return errors.Join(err, c.Stop(dctx))
	}
	if err != nil {
		return fmt.Errorf("conductor %s run: %w", c.host, err)
	}
	return nil
}

// Start is Run under the name controller-runtime's manager.Runnable
// calls: it blocks until ctx ends and then drains the conductor, so an
// operator adds the conductor itself to its manager:
//
//	if err := mgr.Add(cond); err != nil { ... }
//
// Use Launch for a start that returns as soon as the conductor runs.
func (c *Conductor) Start(ctx context.Context) error { return c.Run(ctx) }

// NeedLeaderElection returns false: every conductor of a fleet runs at
// once (the hash ring shares the nodes out), so a controller-runtime
// manager must start it on every replica, not only on the leader. With
// Start it makes the conductor a manager.LeaderElectionRunnable.
func (c *Conductor) NeedLeaderElection() bool { return false }
