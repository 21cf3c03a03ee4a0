package conductor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
)

// doPower runs a requested power action.
func (c *Conductor) doPower(ctx context.Context, t *task, in intent) error {
	t.consumeIntent()
	target, _ := in.Args["target"].(string)
	timeout, _ := time.ParseDuration(fmt.Sprint(in.Args["timeout"]))
	err := c.powerAction(ctx, t, driver.PowerState(target), timeout)
	if err != nil {
		t.node.LastError = fmt.Sprintf("Failed to change power state to '%s' by '%s': %s", target, target, describeErr(err))
	}
	t.node.TargetPowerState = ""
	return t.save(ctx)
}

// powerAction drives the node's power. It saves the node first (with the
// agent's token and URL wiped for a power off or reboot; a fenced write
// refuses the action before the BMC is asked), then records the result
// in the node (unsaved): power_state.
func (c *Conductor) powerAction(ctx context.Context, t *task, target driver.PowerState, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = c.opts.PowerStateChangeTimeout
	}
	n := t.node
	if (target == driver.PowerOff || target == driver.SoftPowerOff) && n.DisablePowerOff {
		return fmt.Errorf("power off refused: disable_power_off is set on node %s", n.UUID)
	}
	if target == driver.PowerOff || target == driver.Reboot {
		// A hard power off (or power cycle) under a running agent is
		// preceded by a flush of its disks.
		c.syncAgent(ctx, t)
	}
	// Ironic's node_power_action saves the node before it asks the BMC,
	// the agent's URL, token and cached steps already wiped for anything
	// but a power on. So the record says the previous boot's agent is
	// gone before it is: the ramdisk this action boots never meets its
	// predecessor's token, which would answer its lookup with the masked
	// value and lock it out. And the write is fenced: a conductor that
	// lost the node (its reservation broken, the node another's) is
	// refused here and never touches the BMC of a machine another
	// conductor drives.
	d, err := t.driver()
	if err != nil {
		return err
	}
	if _, ok := d.Interface(driver.KindPower).(driver.PowerInterface); !ok {
		return &driver.UnsupportedError{Node: n.UUID, Kind: driver.KindPower, Impl: d.Names[driver.KindPower], Operation: "change the power state"}
	}
	if target != driver.PowerOn {
		forgetAgent(n)
	}
	if err := t.save(ctx); err != nil {
		return fmt.Errorf("power action on node %s not started: %w", n.UUID, err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var got driver.PowerState
	err = callIface(pctx, t, driver.KindPower, "change the power state", func(d *driver.Driver, p driver.PowerInterface, v *driver.Task) error {
		var err error
		if target == driver.Reboot {
			err = p.Reboot(pctx, v, timeout)
		} else {
			err = p.SetPowerState(pctx, v, target, timeout)
		}
		if err != nil {
			return err
		}
		got, err = p.GetPowerState(pctx, v)
		return err
	})
	if err != nil {
		c.publish(Event{Type: EventPower, NodeUUID: n.UUID, NodeName: n.Name, To: n.ProvisionState, PowerState: n.PowerState, Error: describeErr(err)})
		return err
	}
	c.powerChanged(t, target, got)
	return nil
}

// forgetAgent wipes, in the node (unsaved), what a power off or reboot
// ends: the agent's URL, token (unless pre-generated) and cached steps.
func forgetAgent(n *baremetal.Node) {
	if _, pre := n.DriverInternalInfo[driver.InternalAgentTokenPregenerated]; pre {
		return
	}
	for _, k := range []string{driver.InternalAgentURL, driver.InternalAgentToken, driver.InternalAgentVerifyCA, "agent_cached_clean_steps",
		"agent_cached_deploy_steps", "agent_cached_service_steps"} {
		delete(n.DriverInternalInfo, k)
	}
}

// powerChanged records a finished power action in the node (unsaved): the
// power state read afterwards and, unless the node was powered on, the
// agent's URL, token and cached steps forgotten (unless the token is
// pre-generated), and publishes it.
func (c *Conductor) powerChanged(t *task, target, got driver.PowerState) {
	n := t.node
	n.PowerState = got
	if target != driver.PowerOn {
		forgetAgent(n)
	}
	c.publish(Event{Type: EventPower, NodeUUID: n.UUID, NodeName: n.Name, To: n.ProvisionState, PowerState: n.PowerState})
}

// SetPowerState asks for a power action: power on, power off, rebooting,
// soft power off or soft rebooting. target_power_state is set while it
// runs; timeout 0 means PowerStateChangeTimeout.
func (c *Conductor) SetPowerState(ctx context.Context, ident string, target statemachine.PowerState, timeout time.Duration) error {
	if !statemachine.IsPowerTarget(target) {
		return fmt.Errorf("power action on node %s: %w", ident, &statemachine.PowerStateError{Value: string(target), Accepted: statemachine.PowerTargets()})
	}
	if err := c.checkRunning(); err != nil {
		return err
	}
	t, err := c.acquire(ctx, ident)
	if err != nil {
		return err
	}
	n := t.node
	if (target == statemachine.PowerOff || target == statemachine.PowerSoftOff) && n.DisablePowerOff {
		t.release()
		return &VerbError{Verb: "power off", Node: n.UUID, State: n.ProvisionState, Reason: "disable_power_off is set"}
	}
	n.TargetPowerState = target
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[intentKey] = intent{Op: opPower, RequestedAt: c.clock.Now(),
		Args: map[string]any{"target": string(target), "timeout": timeout.String()}}.encode()
	if err := t.save(ctx); err != nil {
		t.release()
		return err
	}
	c.submit(job{uuid: n.UUID, node: n})
	return nil
}

// powerOffAgent powers off a node whose agent runs, in Ironic's
// tear_down_agent order: the disks are flushed (standby.sync), the agent
// is asked to power the machine off (standby.power_off, unless
// ForceOOBPowerOff), the power state is polled for up to PowerOffWait,
// and only a node still on is powered off out of band. Without an agent
// it is a plain out-of-band power off.
func (c *Conductor) powerOffAgent(ctx context.Context, t *task) error {
	n := t.node
	a := agentOf(n)
	if a.URL == "" || c.agent.Client == nil || n.PowerState != driver.PowerOn {
		return c.powerAction(ctx, t, driver.PowerOff, 0)
	}
	c.syncAgent(ctx, t)
	if !c.agent.ForceOOBPowerOff && !n.DisablePowerOff {
		if res, err := c.agent.Client.PowerOff(ctx, a); err != nil {
			c.log.Warn("agent did not accept the soft power off; powering off out of band", "node", n.UUID, "error", err)
		} else if failed := c.agentCommandFailed(ctx, a, res); failed != nil {
			c.log.Warn("agent's soft power off failed; powering off out of band", "node", n.UUID, "error", failed)
		} else if c.waitPoweredOff(ctx, t) {
			c.powerChanged(t, driver.PowerOff, driver.PowerOff)
			return nil
		} else {
			c.log.Warn("node did not power off in time after its agent's power off; powering off out of band",
				"node", n.UUID, "wait", c.agent.PowerOffWait)
		}
	}
	// The disks were flushed above: power off without a second sync.
	url := n.DriverInternalInfo[driver.InternalAgentURL]
	delete(n.DriverInternalInfo, driver.InternalAgentURL)
	if err := c.powerAction(ctx, t, driver.PowerOff, 0); err != nil {
		n.DriverInternalInfo[driver.InternalAgentURL] = url
		return err
	}
	return nil
}

// waitPoweredOff polls the node's power state until it reads power off or
// PowerOffWait has passed (or ctx ends).
func (c *Conductor) waitPoweredOff(ctx context.Context, t *task) bool {
	deadline := c.clock.Now().Add(c.agent.PowerOffWait)
	for {
		var ps driver.PowerState
		err := callIface(ctx, t, driver.KindPower, "read the power state", func(d *driver.Driver, p driver.PowerInterface, v *driver.Task) error {
			var err error
			ps, err = p.GetPowerState(ctx, v)
			return err
		})
		if err == nil && ps == driver.PowerOff {
			return true
		}
		wait := c.agent.PowerOffPollInterval
		if left := deadline.Sub(c.clock.Now()); left <= 0 {
			return false
		} else if left < wait {
			wait = left
		}
		select {
		case <-ctx.Done():
			return false
		case <-c.clock.After(wait):
		}
	}
}

// powerBootingAgent runs a power action (power on or reboot) that boots
// the node into a ramdisk whose agent will look the node up. When the
// node will have no token after the action (it was wiped for this boot,
// or the reboot wipes it; a pre-generated token stays), a lookup during
// the action is answered at once through a token desk, and the token it
// was given is saved with the node before the desk closes.
func (c *Conductor) powerBootingAgent(ctx context.Context, t *task, target driver.PowerState) error {
	n := t.node
	_, pre := n.DriverInternalInfo[driver.InternalAgentTokenPregenerated]
	tok, _ := n.DriverInternalInfo[driver.InternalAgentToken].(string)
	// A reboot forgets the token (unless pre-generated); a power-on
	// keeps whatever token the node has.
	if pre || (tok != "" && target != driver.Reboot) {
		return c.powerAction(ctx, t, target, 0)
	}
	d := &tokenDesk{}
	if _, busy := c.bootTokens.LoadOrStore(n.UUID, d); busy {
		// Cannot happen while this conductor holds the node's lock.
		return c.powerAction(ctx, t, target, 0)
	}
	defer func() {
		d.mu.Lock()
		d.closed = true
		d.mu.Unlock()
		c.bootTokens.CompareAndDelete(n.UUID, d)
	}()
	err := c.powerAction(ctx, t, target, 0)
	d.mu.Lock()
	tok = d.token
	if tok == "" {
		// No lookup came: later ones take the usual path (the lock,
		// then the stored token).
		d.closed = true
	}
	d.mu.Unlock()
	if tok == "" {
		return err
	}
	// The desk stays open (later lookups get the masked token, and
	// heartbeats are checked against it) until the token is saved.
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[driver.InternalAgentToken] = tok
	if serr := t.save(ctx); serr != nil {
		return errors.Join(err, serr)
	}
	return err
}

// lockdownAgent locks the node's agent down (system.lockdown) instead of
// powering the node off, for a node with disable_power_off, in Ironic's
// order: the disks are flushed, the command is sent, and the agent is
// polled until it stops answering, for at most PowerOffWait. With
// mustAnswer false an agent that is already gone (or a node with no
// agent URL) is fine (Ironic's fail_if_unavailable=False); with it true
// that is an error, as is an agent still answering after the wait. The
// agent's URL and token are forgotten either way.
func (c *Conductor) lockdownAgent(ctx context.Context, t *task, mustAnswer bool) error {
	n := t.node
	a := agentOf(n)
	defer wipeAgent(n)
	if a.URL == "" || c.agent.Client == nil {
		if mustAnswer {
			return fmt.Errorf("cannot lock down the agent of node %s: no agent URL recorded", n.UUID)
		}
		return nil
	}
	if !mustAnswer {
		if _, err := c.agent.Client.ListCommands(ctx, a); errors.Is(err, agentclient.ErrConnectionFailed) {
			c.log.Debug("agent already gone before its lockdown", "node", n.UUID)
			return nil
		}
	}
	c.syncAgent(ctx, t)
	if _, err := c.agent.Client.Lockdown(ctx, a); err != nil {
		return fmt.Errorf("failed to lock down the agent of node %s: %w", n.UUID, err)
	}
	deadline := c.clock.Now().Add(c.agent.PowerOffWait)
	for {
		if _, err := c.agent.Client.ListCommands(ctx, a); errors.Is(err, agentclient.ErrConnectionFailed) {
			c.log.Info("agent locked down: disable_power_off is set", "node", n.UUID)
			return nil
		}
		wait := c.agent.PowerOffPollInterval
		if left := deadline.Sub(c.clock.Now()); left <= 0 {
			return fmt.Errorf("the agent of node %s still answers %s after system.lockdown", n.UUID, c.agent.PowerOffWait)
		} else if left < wait {
			wait = left
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.clock.After(wait):
		}
	}
}
