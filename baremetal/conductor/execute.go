package conductor

import (
	"context"
	"fmt"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// The operations an intent names.
const (
	opVerify          = "verify"
	opInspect         = "inspect"
	opClean           = "clean"
	opDeploy          = "deploy"
	opTearDown        = "tear_down"
	opRescue          = "rescue"
	opUnrescue        = "unrescue"
	opService         = "service"
	opAdopt           = "adopt"
	opAbort           = "abort"
	opContinueService = "continue_service"
	opPower           = "power"
	// opContinueInspection processes the inspection data a ramdisk
	// posted (see ContinueInspection).
	opContinueInspection = "continue_inspection"
)

// execute runs an intent on a reserved node.
func (c *Conductor) execute(ctx context.Context, t *task, in intent) {
	var err error
	switch in.Op {
	case opVerify:
		err = c.doVerify(ctx, t)
	case opInspect:
		err = c.doInspect(ctx, t)
	case opClean:
		err = c.doClean(ctx, t, in)
	case opDeploy:
		err = c.doDeploy(ctx, t, in)
	case opTearDown:
		err = c.doTearDown(ctx, t)
	case opRescue:
		err = c.doRescue(ctx, t)
	case opUnrescue:
		err = c.doUnrescue(ctx, t)
	case opService:
		err = c.doService(ctx, t, in)
	case opContinueService:
		t.consumeIntent()
		err = c.continueSteps(ctx, t, steps.Service)
	case opAdopt:
		err = c.doAdopt(ctx, t)
	case opAbort:
		err = c.doAbort(ctx, t, in)
	case opPower:
		err = c.doPower(ctx, t, in)
	case opContinueInspection:
		err = c.doContinueInspection(ctx, t, in)
	case opConsole:
		err = c.doConsole(ctx, t, in)
	default:
		t.consumeIntent()
		err = fmt.Errorf("node %s: unknown intent %q", t.uuid(), in.Op)
		t.fail(ctx, err.Error(), true)
	}
	if err != nil {
		c.log.Warn("operation ended with an error", "node", t.uuid(), "op", in.Op, "error", err)
	}
}

func (c *Conductor) doVerify(ctx context.Context, t *task) error {
	t.consumeIntent()
	var ps driver.PowerState
	var warnings []driver.ValidationWarning
	err := callIface(ctx, t, driver.KindPower, "verify", func(d *driver.Driver, p driver.PowerInterface, v *driver.Task) error {
		if err := p.Validate(ctx, v); err != nil {
			return err
		}
		warnings = d.ValidationWarnings(v)
		var err error
		ps, err = p.GetPowerState(ctx, v)
		return err
	})
	// Validation warnings (a misspelt driver_info key) fail nothing; they
	// go to the node's history and the log.
	for _, w := range warnings {
		c.log.Warn("node validation warning", "node", t.uuid(), "field", w.Field, "key", w.Key, "warning", w.Message)
		c.history(ctx, t.uuid(), "validation warning", "validation", w.String(), baremetal.HistoryWarning)
	}
	if err != nil {
		msg := fmt.Sprintf("Failed to verify node %s: %s", t.uuid(), describeErr(err))
		t.fail(ctx, msg, false)
		return err
	}
	t.node.PowerState = ps
	return t.process(ctx, statemachine.EventDone, moveOpts{})
}

func (c *Conductor) doInspect(ctx context.Context, t *task) error {
	t.consumeIntent()
	var res driver.StepResult
	inband := false
	// Inspection records the machine's identity afresh (a deliberate
	// re-cabling is accepted by inspecting the node); a failed inspection
	// keeps the old record.
	prevIdentity, hadIdentity := t.node.DriverInternalInfo[driver.IdentityKey]
	delete(t.node.DriverInternalInfo, driver.IdentityKey)
	err := callIface(ctx, t, driver.KindInspect, "inspect", func(d *driver.Driver, in driver.InspectInterface, v *driver.Task) error {
		_, inband = in.(driver.InbandInspector)
		if err := in.Validate(ctx, v); err != nil {
			return err
		}
		var err error
		res, err = in.InspectHardware(ctx, v)
		return err
	})
	if err == nil && res.Wait && res.RebootRequested {
		// In-band inspection: boot the ramdisk with the inspection
		// callback and wait for its data (ContinueInspection).
		return c.startInbandInspection(ctx, t, inband)
	}
	if err != nil {
		if hadIdentity {
			t.node.DriverInternalInfo = ensureMap(t.node.DriverInternalInfo)
			t.node.DriverInternalInfo[driver.IdentityKey] = prevIdentity
		}
		msg := fmt.Sprintf("Failed to inspect hardware. Reason: %s", describeErr(err))
		t.fail(ctx, msg, false)
		return err
	}
	if res.Wait {
		return t.process(ctx, statemachine.EventWait, moveOpts{keepTarget: true})
	}
	if err := c.storeOOBInventory(ctx, t); err != nil {
		msg := fmt.Sprintf("Failed to store the inspection inventory of node %s: %s", t.uuid(), describeErr(err))
		t.fail(ctx, msg, false)
		return err
	}
	t.node.InspectionFinishedAt = c.clock.Now().UTC()
	return t.process(ctx, statemachine.EventDone, moveOpts{})
}

// doClean starts automated (provide, tear-down) or manual cleaning.
func (c *Conductor) doClean(ctx context.Context, t *task, in intent) error {
	t.consumeIntent()
	n := t.node
	manual := n.TargetProvisionState == statemachine.Manageable
	var user []steps.Step
	disable := false
	if manual {
		var err error
		user, err = stepsFromJSON(in.Args["clean_steps"])
		if err != nil {
			t.fail(ctx, fmt.Sprintf("invalid stored clean steps: %v", err), true)
			return err
		}
		disable, _ = in.Args["disable_ramdisk"].(bool)
	}
	return c.startSteps(ctx, t, steps.Clean, user, disable)
}

func (c *Conductor) doService(ctx context.Context, t *task, in intent) error {
	t.consumeIntent()
	user, err := stepsFromJSON(in.Args["service_steps"])
	if err != nil {
		return c.stepsFailed(ctx, t, steps.Service, describeErr(err), false)
	}
	disable, _ := in.Args["disable_ramdisk"].(bool)
	return c.startSteps(ctx, t, steps.Service, user, disable)
}

func (c *Conductor) doAdopt(ctx context.Context, t *task) error {
	t.consumeIntent()
	err := callIface(ctx, t, driver.KindDeploy, "adopt", func(d *driver.Driver, dep driver.DeployInterface, v *driver.Task) error {
		if err := dep.Validate(ctx, v); err != nil {
			return err
		}
		return dep.TakeOver(ctx, v)
	})
	if err != nil {
		t.fail(ctx, fmt.Sprintf("Error while attempting to adopt node %s: %s", t.uuid(), describeErr(err)), false)
		return err
	}
	return t.process(ctx, statemachine.EventDone, moveOpts{})
}

// doAbort runs the clean-up Ironic's abort handlers do after the abort
// transition.
func (c *Conductor) doAbort(ctx context.Context, t *task, in intent) error {
	t.consumeIntent()
	from, _ := in.Args["from"].(string)
	n := t.node
	var err error
	switch statemachine.State(from) {
	case statemachine.CleanWait, statemachine.CleanHold:
		err = t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			if sp, ok := driver.As[driver.StepPreparer](d.Deploy()); ok {
				return sp.TearDownSteps(ctx, v, steps.Clean)
			}
			return nil
		})
		if err == nil && c.agentBased(t) {
			err = c.shutdownRamdisk(ctx, t, steps.Clean)
		}
		_ = steps.Wipe(steps.Clean, ensureMap(n.DriverInternalInfo))
		n.CleanStep = map[string]any{}
	case statemachine.DeployWait, statemachine.DeployHold:
		err = t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			if dep := d.Deploy(); dep != nil {
				return dep.CleanUp(ctx, v)
			}
			return nil
		})
		_ = steps.Wipe(steps.Deploy, ensureMap(n.DriverInternalInfo))
		n.DeployStep = map[string]any{}
	case statemachine.ServiceWait, statemachine.ServiceHold, statemachine.ServiceFailed:
		// Back to active: Ironic's do_node_service_abort tears the
		// service down and the instance boots again.
		disabled := runRamdiskDisabled(n, steps.Service)
		err = t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			if sp, ok := driver.As[driver.StepPreparer](d.Deploy()); ok {
				return sp.TearDownSteps(ctx, v, steps.Service)
			}
			return nil
		})
		if err == nil {
			err = c.leaveServicing(ctx, t, disabled)
		}
		_ = steps.Wipe(steps.Service, ensureMap(n.DriverInternalInfo))
		delete(n.DriverInternalInfo, ramdiskDisabledKey(steps.Service))
		n.ServiceStep = map[string]any{}
	case statemachine.RescueWait:
		// Ironic's _do_node_rescue_abort: the rescue's clean-up (for
		// the agent's rescue, the ramdisk's boot and the rescuing
		// network too).
		err = c.cleanUpRescue(ctx, t)
	case statemachine.InspectWait:
		// The ramdisk booted for in-band inspection is shut down (Ironic
		// always powers the node off on an inspection abort).
		err = c.endInspectionBoot(ctx, t, true)
	}
	wipeAgent(n)
	if err != nil {
		n.LastError = fmt.Sprintf("%s; clean-up after abort failed: %s", n.LastError, describeErr(err))
	}
	return t.save(ctx)
}
