package conductor

import (
	"context"
	"errors"
	"fmt"

	"github.com/anvilmetal/anvil/baremetal"
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
func (k actionLimit) states() []statemachine.State {
	switch k {
	case limitDeploy:
		return []statemachine.State{statemachine.Deploying, statemachine.DeployWait}
	case limitClean:
		return []statemachine.State{statemachine.Deleting, statemachine.Cleaning, statemachine.CleanWait}
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
func (c *Conductor) checkActionLimit(ctx context.Context, n *baremetal.Node, verb string, kind actionLimit) error {
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
	f := baremetal.NodeFilter{ProvisionStates: states}
	if c.opts.MaxConcurrentPerConductorGroup {
		group := n.ConductorGroup
		f.ConductorGroup = &group
	}
	count, err := c.store.CountNodes(ctx, f)
	if err != nil {
		return fmt.Errorf("%s of node %s: count the nodes in %v for %s: %w", verb, n.UUID, states, option, err)
	}
	if count < limit {
		return nil
	}
	c.log.Debug("verb refused: concurrent action limit", "node", n.UUID, "verb", verb, "option", option, "limit", limit, "count", count)
	return &ConcurrentActionLimitError{
		Node: n.UUID, Action: verb, Option: option, Limit: limit, Count: count,
		States:            stateNames(states),
		PerConductorGroup: c.opts.MaxConcurrentPerConductorGroup,
		ConductorGroup:    n.ConductorGroup,
	}
}

// ErrConcurrentActionLimit means a deploy, rebuild, undeploy, provide or
// manual clean was refused because too many nodes are already
// deploying or cleaning (Ironic's ConcurrentActionLimit, HTTP 503).
// Nothing was changed; the caller backs off and retries.
var ErrConcurrentActionLimit = errors.New("conductor: concurrent action limit reached")

// ConcurrentActionLimitError says a verb was refused before anything
// changed because the number of nodes already in the states its limit
// counts reached the limit, as Ironic's ConcurrentActionLimit (HTTP 503)
// does: deploy and rebuild count the nodes in deploying and wait call-back
// against Options.MaxConcurrentDeploy; undeploy, provide and manual clean
// count the nodes in deleting, cleaning and clean wait against
// Options.MaxConcurrentClean. The count covers every conductor sharing the
// database (only the node's conductor group with
// Options.MaxConcurrentPerConductorGroup). It matches
// ErrConcurrentActionLimit.
//
// The refusal is temporary: the count falls as operations finish. An
// embedder backs off (a second or so; longer after repeated refusals) and
// calls the verb again, or reports HTTP 503 to its own caller. The message
// contains "unable to initiate <action> due to concurrent action limit",
// for clients that receive only the text.
type ConcurrentActionLimitError struct {
	// Node is the UUID of the node whose verb was refused.
	Node string
	// Action is the refused verb ("deploy", "rebuild", "undeploy",
	// "provide" or "clean").
	Action string
	// Option names the limit: "max_concurrent_deploy" or
	// "max_concurrent_clean" (Options.MaxConcurrentDeploy or
	// Options.MaxConcurrentClean).
	Option string
	// Limit is the option's value.
	Limit int
	// Count is how many nodes were in the counted states.
	Count int
	// States are the provision states counted.
	States []string
	// PerConductorGroup is true when only the nodes of ConductorGroup
	// were counted.
	PerConductorGroup bool
	// ConductorGroup is the node's conductor group ("" is the default
	// group); meaningful with PerConductorGroup.
	ConductorGroup string
}

func (e *ConcurrentActionLimitError) Error() string {
	scope := "across all conductor groups"
	if e.PerConductorGroup {
		scope = fmt.Sprintf("in conductor group %q", e.ConductorGroup)
	}
	return fmt.Sprintf("node %s: unable to initiate %s due to concurrent action limit: %d nodes %s are in %q, %s is %d; retry later",
		e.Node, e.Action, e.Count, scope, e.States, e.Option, e.Limit)
}

// Is reports whether target is ErrConcurrentActionLimit.
func (e *ConcurrentActionLimitError) Is(target error) bool { return target == ErrConcurrentActionLimit }

// stateNames returns states as strings.
func stateNames(states []statemachine.State) []string {
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
	}
	return names
}
