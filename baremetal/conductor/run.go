package conductor

import (
	"context"
	"errors"
	"fmt"
)

// Run starts the conductor, serves until ctx ends, and then drains it
// (see Drain) within Options.DrainTimeout; it returns nil after a clean
// shutdown, the error of Start if the conductor could not start, or the
// error of the drain. It also returns nil, without draining, when Stop or
// Drain was called by someone else meanwhile.
//
// Run has the contract of controller-runtime's manager.Runnable.Start
// (block until ctx ends, nil on a clean shutdown); Start itself returns
// as soon as the conductor is started, so a manager must be given
// cond.Runnable(), whose Start is Run, never cond itself.
func (c *Conductor) Run(ctx context.Context) error {
	if err := c.Start(ctx); err != nil {
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
		return fmt.Errorf("baremetal: conductor %s run: %w", c.host, err)
	}
	return nil
}

// Runnable returns the conductor as a controller-runtime
// manager.Runnable and manager.LeaderElectionRunnable:
//
//	if err := mgr.Add(cond.Runnable()); err != nil { ... }
//
// The manager then starts the conductor with Run on every replica and,
// when its context ends, drains it within Options.DrainTimeout.
func (c *Conductor) Runnable() *Runnable { return &Runnable{c: c} }

// Runnable adapts a Conductor to controller-runtime's manager.Runnable:
// its Start blocks (it is Conductor.Run), where Conductor.Start returns at
// once. Get one from Conductor.Runnable.
type Runnable struct{ c *Conductor }

// Start runs the conductor until ctx ends, then drains it; see
// Conductor.Run.
func (r *Runnable) Start(ctx context.Context) error { return r.c.Run(ctx) }

// NeedLeaderElection returns false; see Conductor.NeedLeaderElection.
func (r *Runnable) NeedLeaderElection() bool { return r.c.NeedLeaderElection() }

// NeedLeaderElection returns false: every conductor of a fleet runs at
// once (the hash ring shares the nodes out), so a controller-runtime
// manager must start it on every replica, not only on the leader. With
// Run it makes the conductor a manager.LeaderElectionRunnable.
func (c *Conductor) NeedLeaderElection() bool { return false }
