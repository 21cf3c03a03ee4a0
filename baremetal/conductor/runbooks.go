package conductor

import (
	"context"
	"fmt"
	"slices"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/steps"
)

// runbookPlan is a stored runbook resolved for a clean or service verb.
type runbookPlan struct {
	name           string
	traits         []string
	byName         bool
	verb           string
	steps          []steps.Step
	disableRamdisk bool
}

// runbookSteps resolves the runbook named by ident (empty: none) into
// the steps of the verb; given steps and a runbook together are refused.
// byName selects the rule of Ironic's API before 1.112 (see check).
func (c *Conductor) runbookSteps(ctx context.Context, node, verb string, given []steps.Step, ident string, byName bool) (*runbookPlan, error) {
	if ident == "" {
		return nil, nil
	}
	if len(given) > 0 {
		return nil, &baremetal.InvalidFieldError{Kind: "node", Ident: node, Field: "runbook",
			Expected: fmt.Sprintf("either %s steps or a runbook, not both", verb)}
	}
	rb, err := c.store.Runbooks().Get(ctx, ident)
	if err != nil {
		return nil, err
	}
	p := &runbookPlan{name: rb.Name, traits: rb.Traits, byName: byName, verb: verb, disableRamdisk: rb.DisableRamdisk}
	for _, s := range rb.SortedSteps() {
		p.steps = append(p.steps, steps.Step{Interface: s.Interface, Name: s.Step, Args: s.Args})
	}
	return p, nil
}

// check applies Ironic's rule under the node's lock: a runbook runs only
// on a node that has one of the runbook's traits (1.112), or, by the
// rule before 1.112, that has the runbook's name among its traits.
func (p *runbookPlan) check(t *task) error {
	if p == nil {
		return nil
	}
	refuse := func(reason string) error {
		return &VerbError{Verb: p.verb, Node: t.node.UUID, State: t.node.ProvisionState, Reason: reason}
	}
	if p.byName {
		if slices.Contains(t.node.Traits, p.name) {
			return nil
		}
		return refuse(fmt.Sprintf("the node does not have the trait %s that runbook %s requires", p.name, p.name))
	}
	if len(p.traits) == 0 {
		return refuse(fmt.Sprintf("runbook %s has no traits, so it is approved for no node", p.name))
	}
	for _, tr := range p.traits {
		if slices.Contains(t.node.Traits, tr) {
			return nil
		}
	}
	return refuse(fmt.Sprintf("the node has none of the traits %v of runbook %s", p.traits, p.name))
}
