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
	verb           string
	steps          []steps.Step
	disableRamdisk bool
}

// runbookSteps resolves the runbook named by ident (empty: none) into
// the steps of the verb; given steps and a runbook together are refused.
func (c *Conductor) runbookSteps(ctx context.Context, node, verb string, given []steps.Step, ident string) (*runbookPlan, error) {
	if ident == "" {
		return nil, nil
	}
	if len(given) > 0 {
		return nil, &baremetal.InvalidFieldError{Kind: "node", Ident: node, Field: "runbook",
			Expected: fmt.Sprintf("either %s steps or a runbook, not both", verb)}
	}
	rb, err := c.store.GetRunbook(ctx, ident)
	if err != nil {
		return nil, err
	}
	p := &runbookPlan{name: rb.Name, verb: verb, disableRamdisk: rb.DisableRamdisk}
	for _, s := range rb.SortedSteps() {
		p.steps = append(p.steps, steps.Step{Interface: s.Interface, Name: s.Step, Args: s.Args})
	}
	return p, nil
}

// check applies Ironic's rule under the node's lock: a runbook runs only
// on a node that has the runbook's name among its traits.
func (p *runbookPlan) check(t *task) error {
	if p == nil || slices.Contains(t.node.Traits, p.name) {
		return nil
	}
	return &VerbError{Verb: p.verb, Node: t.node.UUID, State: t.node.ProvisionState,
		Reason: fmt.Sprintf("the node does not have the trait %s that runbook %s requires", p.name, p.name)}
}
