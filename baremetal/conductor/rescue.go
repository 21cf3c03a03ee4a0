package conductor

import (
	"context"
	"errors"
	"fmt"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/shacrypt"
	"github.com/anvilmetal/anvil/statemachine"
)

// The instance_info keys of a rescue: the password the user gave (for
// drivers that read it) and its crypt hash, which is all the agent gets
// (Ironic's rescue_password and hashed_rescue_password). Both are
// secrets: every view masks them, and they are removed once the rescue
// is done, fails or is undone.
const (
	rescuePasswordKey       = "rescue_password"
	hashedRescuePasswordKey = "hashed_rescue_password"
)

// The values of Options.RescuePasswordHashAlgorithm (Ironic's
// [conductor]rescue_password_hash_algorithm).
const (
	RescueHashSHA256 = string(shacrypt.SHA256)
	RescueHashSHA512 = string(shacrypt.SHA512)
)

// forgetRescuePassword removes the rescue password and its hash
// (Ironic's remove_node_rescue_password).
func (t *task) forgetRescuePassword() {
	delete(t.node.InstanceInfo, rescuePasswordKey)
	delete(t.node.InstanceInfo, hashedRescuePasswordKey)
}

// AgentRescuer is what the conductor recognises in a rescue interface
// whose rescue ramdisk is the agent's (the "agent" rescue interface of
// package agentdeploy): its Rescue asks, with StepResult{Wait: true,
// RebootRequested: true}, for the cross-interface work Ironic's
// AgentRescue does through task.driver, which the conductor does here:
// power off, the instance's boot cleaned up, the tenant network left
// for the rescuing network, the rescue ramdisk prepared by the boot
// interface (rescue_kernel and rescue_ramdisk), power on; the agent's
// heartbeat then finalizes the rescue (rescue.finalize_rescue with the
// password's hash). Unrescue powers off, cleans the rescue up, returns
// to the tenant network, prepares the instance's boot and powers on.
type AgentRescuer interface {
	AgentBased() bool
}

// agentRescue reports whether the node's rescue interface is an
// AgentRescuer.
func (c *Conductor) agentRescue(t *task) bool {
	d, err := t.driver()
	if err != nil {
		return false
	}
	ar, ok := d.Interface(driver.KindRescue).(AgentRescuer)
	return ok && ar.AgentBased()
}

// rescueValidator is the boot interfaces' check of a rescue ramdisk
// (Ironic's validate_rescue: the pxe interfaces' ValidateRescue).
type rescueValidator interface {
	ValidateRescue(ctx context.Context, t *driver.Task) error
}

func (c *Conductor) doRescue(ctx context.Context, t *task) error {
	t.consumeIntent()
	var res driver.StepResult
	err := callIface(ctx, t, driver.KindRescue, "rescue", func(d *driver.Driver, r driver.RescueInterface, v *driver.Task) error {
		var err error
		res, err = r.Rescue(ctx, v)
		return err
	})
	if err == nil && res.Wait && res.RebootRequested {
		err = c.bootRescueRamdisk(ctx, t)
	}
	if err != nil {
		t.forgetRescuePassword()
		t.fail(ctx, fmt.Sprintf("Failed to rescue node %s: %s", t.uuid(), describeErr(err)), false)
		return err
	}
	if res.Wait {
		return t.process(ctx, statemachine.EventWait, moveOpts{keepTarget: true})
	}
	return t.process(ctx, statemachine.EventDone, moveOpts{})
}

// bootRescueRamdisk does what Ironic's AgentRescue.rescue does around
// the boot interface: power off (unless disable_power_off), the
// instance's boot cleaned up, the tenant network left for the rescuing
// one, the ramdisk boot prepared (the boot interface picks the rescue
// kernel and ramdisk from the node's state) with the agent's token and
// URL forgotten, then power on (a reboot with disable_power_off).
func (c *Conductor) bootRescueRamdisk(ctx context.Context, t *task) error {
	n := t.node
	if !n.DisablePowerOff && n.PowerState != driver.PowerOff {
		if err := c.powerAction(ctx, t, driver.PowerOff, 0); err != nil {
			return err
		}
	}
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		if b := d.Boot(); b != nil {
			if err := b.CleanUpInstance(ctx, v); err != nil {
				return err
			}
		}
		if nw := d.Network(); nw != nil {
			return nw.RemoveNetwork(ctx, v, driver.NetworkTenant)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := c.prepareRamdiskBoot(ctx, t, driver.NetworkRescuing, c.agentRamdiskParams()); err != nil {
		return err
	}
	if n.DisablePowerOff {
		return c.powerBootingAgent(ctx, t, driver.Reboot)
	}
	return c.powerBootingAgent(ctx, t, driver.PowerOn)
}

func (c *Conductor) doUnrescue(ctx context.Context, t *task) error {
	t.consumeIntent()
	err := callIface(ctx, t, driver.KindRescue, "unrescue", func(d *driver.Driver, r driver.RescueInterface, v *driver.Task) error {
		return r.Unrescue(ctx, v)
	})
	if err == nil && c.agentRescue(t) {
		err = c.bootInstanceAfterRescue(ctx, t)
	}
	if err != nil {
		t.fail(ctx, fmt.Sprintf("Failed to unrescue node %s: %s", t.uuid(), describeErr(err)), false)
		return err
	}
	t.forgetRescuePassword()
	wipeAgent(t.node)
	return t.process(ctx, statemachine.EventDone, moveOpts{})
}

// bootInstanceAfterRescue is Ironic's AgentRescue.unrescue around the
// boot interface: power off (unless disable_power_off), the rescue
// cleaned up (cleanUpRescue), the tenant network back, the instance's
// boot prepared (and the disk made the persistent boot device, as the
// deploy's prepare_instance_boot does, for an instance on disk), power
// on (a reboot with disable_power_off).
func (c *Conductor) bootInstanceAfterRescue(ctx context.Context, t *task) error {
	n := t.node
	if !n.DisablePowerOff && n.PowerState != driver.PowerOff {
		if err := c.powerAction(ctx, t, driver.PowerOff, 0); err != nil {
			return err
		}
	}
	if err := c.cleanUpRescue(ctx, t); err != nil {
		return err
	}
	ramdiskInstance := c.ramdiskDeploy(t)
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		if nw := d.Network(); nw != nil {
			if err := nw.AddNetwork(ctx, v, driver.NetworkTenant); err != nil {
				return err
			}
		}
		if b := d.Boot(); b != nil {
			if err := b.PrepareInstance(ctx, v); err != nil {
				return err
			}
		}
		if m := d.Management(); m != nil && !ramdiskInstance {
			return m.SetBootDevice(ctx, v, driver.BootDisk, true)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n.DisablePowerOff {
		return c.powerAction(ctx, t, driver.Reboot, 0)
	}
	return c.powerAction(ctx, t, driver.PowerOn, 0)
}

// cleanUpRescue is Ironic's RescueInterface.clean_up: the rescue
// password forgotten and the rescue interface's own clean-up; for the
// agent's rescue also the ramdisk's boot and the rescuing network
// removed. The node's power is left as it is.
func (c *Conductor) cleanUpRescue(ctx context.Context, t *task) error {
	t.forgetRescuePassword()
	agent := c.agentRescue(t)
	return t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		if r := d.Rescue(); r != nil {
			if err := r.CleanUp(ctx, v); err != nil && !errors.Is(err, driver.ErrUnsupported) {
				return err
			}
		}
		if !agent {
			return nil
		}
		if b := d.Boot(); b != nil {
			if err := b.CleanUpRamdisk(ctx, v); err != nil {
				return err
			}
		}
		if nw := d.Network(); nw != nil {
			return nw.RemoveNetwork(ctx, v, driver.NetworkRescuing)
		}
		return nil
	})
}

// rescueFailed is Ironic's rescuing_error_handler: power off, the rescue
// cleaned up, the agent forgotten, last_error msg (or why the clean-up
// failed) and, when fail is set, "rescue failed".
func (c *Conductor) rescueFailed(ctx context.Context, t *task, msg string, fail bool) {
	err := c.powerAction(ctx, t, driver.PowerOff, 0)
	if err == nil {
		err = c.cleanUpRescue(ctx, t)
	}
	t.forgetRescuePassword()
	wipeAgent(t.node)
	if err != nil {
		msg = fmt.Sprintf("%s; rescue operation was unsuccessful, clean up failed for node %s: %s", msg, t.uuid(), describeErr(err))
	}
	if fail {
		t.fail(ctx, msg, false)
		return
	}
	t.node.LastError = msg
}

// Rescue boots an active node into the rescue ramdisk with the given
// password for the rescue user. As Ironic's do_node_rescue, it records
// the password and its crypt hash (Options.RescuePasswordHashAlgorithm)
// in instance_info, then validates the rescue interface (and, for the
// agent's rescue, the boot interface's rescue ramdisk); a node in
// maintenance or failing validation is refused and keeps neither.
func (c *Conductor) Rescue(ctx context.Context, ident, password string) error {
	if err := statemachine.VerbRescue.Validate(statemachine.VerbInput{RescuePassword: password}); err != nil {
		return fmt.Errorf("rescue of node %s: %w", ident, err)
	}
	return c.accept(ctx, ident, verb{name: "rescue", event: statemachine.EventRescue, op: opRescue,
		check: func(t *task) error {
			n := t.node
			if n.Maintenance {
				return &VerbError{Verb: "rescue", Node: n.UUID, State: n.ProvisionState, Reason: "the node is in maintenance"}
			}
			hashed, err := shacrypt.Hash(shacrypt.Algorithm(c.opts.RescuePasswordHashAlgorithm), password)
			if err != nil {
				return fmt.Errorf("rescue of node %s: hashing the rescue password: %w", n.UUID, err)
			}
			if n.InstanceInfo == nil {
				n.InstanceInfo = map[string]any{}
			}
			n.InstanceInfo[rescuePasswordKey] = password
			n.InstanceInfo[hashedRescuePasswordKey] = hashed
			if err := c.validateRescue(ctx, t); err != nil {
				t.forgetRescuePassword()
				return err
			}
			return nil
		}})
}

// validateRescue runs the rescue interface's Validate and, for the
// agent's rescue, the boot interface's (its ValidateRescue too when it
// has one), as Ironic's AgentRescue.validate does.
func (c *Conductor) validateRescue(ctx context.Context, t *task) error {
	agent := c.agentRescue(t)
	return callIface(ctx, t, driver.KindRescue, "rescue", func(d *driver.Driver, r driver.RescueInterface, v *driver.Task) error {
		if err := r.Validate(ctx, v); err != nil {
			return err
		}
		if !agent {
			return nil
		}
		b := d.Boot()
		if b == nil {
			return nil
		}
		if err := b.Validate(ctx, v); err != nil {
			return err
		}
		if rv, ok := b.(rescueValidator); ok {
			return rv.ValidateRescue(ctx, v)
		}
		return nil
	})
}

// Unrescue returns a rescued node to active.
func (c *Conductor) Unrescue(ctx context.Context, ident string) error {
	return c.accept(ctx, ident, verb{name: "unrescue", event: statemachine.EventUnrescue, op: opUnrescue})
}

// finalizeRescue, at the rescue ramdisk's heartbeat, asks the agent to
// set the rescue user's password (rescue.finalize_rescue with the
// password's hash, a synchronous command after which the agent stops
// serving) and finishes the rescue as Ironic's _finalize_rescue does:
// the rescue cleaned up (the password forgotten, the ramdisk's boot and
// the rescuing network removed for the agent's rescue), the tenant
// network back, "rescue". A busy agent is asked again at its next
// heartbeat; any other failure (or a result other than SUCCEEDED) is
// Ironic's rescuing_error_handler: power off, clean-up, "rescue failed".
func (c *Conductor) finalizeRescue(ctx context.Context, t *task) error {
	n := t.node
	hashed, _ := n.InstanceInfo[hashedRescuePasswordKey].(string)
	if hashed == "" {
		// Recorded before the hash was: hash it now.
		if pw, _ := n.InstanceInfo[rescuePasswordKey].(string); pw != "" {
			h, err := shacrypt.Hash(shacrypt.Algorithm(c.opts.RescuePasswordHashAlgorithm), pw)
			if err != nil {
				return err
			}
			hashed = h
		}
	}
	cl, err := c.agentClient()
	if err == nil && hashed == "" {
		err = fmt.Errorf("the agent's rescue requires instance_info %s", rescuePasswordKey)
	}
	var res *agentclient.CommandResult
	if err == nil {
		res, err = cl.FinalizeRescue(ctx, agentOf(n), hashed)
	}
	if errors.Is(err, agentclient.ErrAgentBusy) {
		return nil
	}
	if err == nil && res != nil && res.Status != agentclient.StatusSucceeded {
		err = fmt.Errorf("the agent returned %s for finalize_rescue", res.Status)
	}
	if err != nil {
		c.rescueFailed(ctx, t, fmt.Sprintf("Node %s failed to perform the rescue operation: %s", n.UUID, describeErr(err)), true)
		return err
	}
	if err := t.process(ctx, statemachine.EventResume, moveOpts{keepTarget: true}); err != nil {
		return err
	}
	if err := c.cleanUpRescue(ctx, t); err != nil {
		c.rescueFailed(ctx, t, fmt.Sprintf("Node %s failed to clean up after the rescue: %s", n.UUID, describeErr(err)), true)
		return err
	}
	if c.agentRescue(t) {
		err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			if nw := d.Network(); nw != nil {
				return nw.AddNetwork(ctx, v, driver.NetworkTenant)
			}
			return nil
		})
		if err != nil {
			c.rescueFailed(ctx, t, fmt.Sprintf("Node %s failed to return to the tenant network after the rescue: %s", n.UUID, describeErr(err)), true)
			return err
		}
	}
	// The agent stopped serving its API: nothing is left to call.
	wipeAgent(n)
	return t.process(ctx, statemachine.EventDone, moveOpts{})
}
