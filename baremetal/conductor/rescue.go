package conductor

import (
	"context"
	"errors"
	"fmt"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
)

func (c *Conductor) doRescue(ctx context.Context, t *task) error {
	t.consumeIntent()
	var res driver.StepResult
	err := callIface(ctx, t, driver.KindRescue, "rescue", func(d *driver.Driver, r driver.RescueInterface, v *driver.Task) error {
		var err error
		res, err = r.Rescue(ctx, v)
		return err
	})
	if err != nil {
		t.fail(ctx, fmt.Sprintf("Failed to rescue node %s: %s", t.uuid(), describeErr(err)), false)
		return err
	}
	if res.Wait {
		return t.process(ctx, statemachine.EventWait, moveOpts{keepTarget: true})
	}
	return t.process(ctx, statemachine.EventDone, moveOpts{})
}

func (c *Conductor) doUnrescue(ctx context.Context, t *task) error {
	t.consumeIntent()
	err := callIface(ctx, t, driver.KindRescue, "unrescue", func(d *driver.Driver, r driver.RescueInterface, v *driver.Task) error {
		return r.Unrescue(ctx, v)
	})
	if err != nil {
		t.fail(ctx, fmt.Sprintf("Failed to unrescue node %s: %s", t.uuid(), describeErr(err)), false)
		return err
	}
	delete(t.node.InstanceInfo, "rescue_password")
	return t.process(ctx, statemachine.EventDone, moveOpts{})
}

// Rescue boots an active node into the rescue ramdisk with the given
// password for the rescue user.
func (c *Conductor) Rescue(ctx context.Context, ident, password string) error {
	if err := statemachine.VerbRescue.Validate(statemachine.VerbInput{RescuePassword: password}); err != nil {
		return fmt.Errorf("rescue of node %s: %w", ident, err)
	}
	return c.accept(ctx, ident, verb{name: "rescue", event: statemachine.EventRescue, op: opRescue,
		check: func(t *task) error {
			if t.node.InstanceInfo == nil {
				t.node.InstanceInfo = map[string]any{}
			}
			t.node.InstanceInfo["rescue_password"] = password
			return nil
		}})
}

// Unrescue returns a rescued node to active.
func (c *Conductor) Unrescue(ctx context.Context, ident string) error {
	return c.accept(ctx, ident, verb{name: "unrescue", event: statemachine.EventUnrescue, op: opUnrescue})
}

// finalizeRescue asks the agent to set the rescue password and finishes
// the rescue.
func (c *Conductor) finalizeRescue(ctx context.Context, t *task) error {
	n := t.node
	cl, err := c.agentClient()
	if err == nil {
		pw, _ := n.InstanceInfo["rescue_password"].(string)
		_, err = cl.FinalizeRescue(ctx, agentOf(n), pw)
	}
	if err != nil {
		if errors.Is(err, agentclient.ErrAgentBusy) {
			return nil
		}
		t.fail(ctx, fmt.Sprintf("Node %s failed to finalize the rescue: %s", n.UUID, describeErr(err)), false)
		return err
	}
	if err := t.process(ctx, statemachine.EventResume, moveOpts{keepTarget: true}); err != nil {
		return err
	}
	delete(n.InstanceInfo, "rescue_password")
	return t.process(ctx, statemachine.EventDone, moveOpts{})
}
