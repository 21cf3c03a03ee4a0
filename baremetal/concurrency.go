package baremetal

import (
	"context"
	"fmt"

	"github.com/anvilmetal/anvil/statemachine"
)

// actionLimit names the concurrency limit a verb is subject to (reference
// §1.5 and §5.3: Ironic's max_concurrent_deploy and max_concurrent_clean);
// the zero value means none.
type actionLimit int

const (
	// limitDeploy: deploy and rebuild, counted against
	// Options.MaxConcurrentDeploy.
	limitDeploy actionLimit = iota + 1
	// limitClean: undeploy, provide and manual clean, counted against
	// Options.MaxConcurrentClean.
	limitClean
)

// states returns the provision states the limit counts, Ironic's: a node
// deploying or waiting for its agent during a deploy; a node being torn
// down or cleaned, or waiting for its agent during cleaning.
func (k actionLimit) states() []string {
	switch k {
	case limitDeploy:
		return []string{string(statemachine.Deploying), string(statemachine.DeployWait)}
	case limitClean:
		return []string{string(statemachine.Deleting), string(statemachine.Cleaning), string(statemachine.CleanWait)}
	}
	return nil
}

// checkActionLimit refuses verb on n with a *ConcurrentActionLimitError
// when the nodes already in the states the limit counts reach it. The
// count is a database count, so it covers every conductor sharing the
// store (only n's conductor group with
// Options.MaxConcurrentPerConductorGroup). Like Ironic's, the check is not
// a reservation: verbs accepted at the same moment by different callers
// may each see the count just under the limit and overshoot it by their
// number.
func (c *Conductor) checkActionLimit(ctx context.Context, n *Node, verb string, kind actionLimit) error {
	var (
		limit  int
		option string
	)
	switch kind {
	case limitDeploy:
		limit, option = c.opts.MaxConcurrentDeploy, "max_concurrent_deploy"
	case limitClean:
		limit, option = c.opts.MaxConcurrentClean, "max_concurrent_clean"
	default:
		return nil
	}
	if limit < 0 {
		return nil
	}
	states := kind.states()
	f := NodeFilter{ProvisionStates: states}
	if c.opts.MaxConcurrentPerConductorGroup {
		group := n.ConductorGroup
		f.ConductorGroup = &group
	}
	count, err := c.store.CountNodes(ctx, f)
	if err != nil {
		return fmt.Errorf("baremetal: %s of node %s: count the nodes in %v for %s: %w", verb, n.UUID, states, option, err)
	}
	if count < limit {
		return nil
	}
	c.log.Debug("verb refused: concurrent action limit", "node", n.UUID, "verb", verb, "option", option, "limit", limit, "count", count)
	return &ConcurrentActionLimitError{
		Node: n.UUID, Action: verb, Option: option, Limit: limit, Count: count,
		States:            states,
		PerConductorGroup: c.opts.MaxConcurrentPerConductorGroup,
		ConductorGroup:    n.ConductorGroup,
	}
}
