package conductor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// startSteps prepares the environment for a clean or service run and
// starts it: synchronously when no ramdisk is needed or it is already up,
// otherwise by waiting for the agent's first heartbeat.
func (c *Conductor) startSteps(ctx context.Context, t *task, kind steps.Kind, user []steps.Step, disableRamdisk bool) error {
	n := t.node
	manual := kind == steps.Clean && n.TargetProvisionState == statemachine.Manageable
	if err := steps.Wipe(kind, ensureMap(n.DriverInternalInfo)); err != nil {
		return c.stepsFailed(ctx, t, kind, err.Error(), false)
	}
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	if kind == steps.Clean && !manual {
		src, err := c.stepSource(ctx, t, kind)
		if err != nil {
			return c.stepsFailed(ctx, t, kind, describeErr(err), false)
		}
		pl, err := c.planner().AutomatedClean(steps.AutomatedCleanRequest{Source: src, NodeAutomatedClean: n.AutomatedClean})
		if err != nil {
			return c.stepsFailed(ctx, t, kind, describeErr(err), false)
		}
		if pl.Skip {
			return c.finishSteps(ctx, t, kind)
		}
	}
	if user != nil {
		raw, _ := stepsToJSON(user)
		n.DriverInternalInfo[userStepsKey(kind)] = raw
	}
	if disableRamdisk {
		keys, _ := kind.Keys()
		n.DriverInternalInfo[keys.DisableRamdisk] = true
		// Kept apart from the progress record, which the finished run's
		// progress clears before its tear-down reads it.
		n.DriverInternalInfo[ramdiskDisabledKey(kind)] = true
	} else {
		delete(n.DriverInternalInfo, ramdiskDisabledKey(kind))
	}
	wait := false
	if !disableRamdisk {
		c.dropStaleAgent(ctx, t)
		reboot := false
		err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			if sp, ok := driver.As[driver.StepPreparer](d.Deploy()); ok {
				res, err := sp.PrepareSteps(ctx, v, kind)
				wait, reboot = res.Wait, res.RebootRequested
				return err
			}
			return nil
		})
		if err == nil && wait && reboot {
			if ft, _ := c.isFastTrack(ctx, t); ft {
				// Fast track with no agent checked in yet (the one that
				// just inspected the node, still up): as Ironic's
				// prepare_inband_cleaning, the ramdisk boot is prepared
				// but the node is not rebooted; the run waits for that
				// agent's heartbeat. Its token stays: it may have looked
				// the node up already.
				err = c.prepareRamdiskConfig(ctx, t, networkPurpose(kind), c.agentRamdiskParams())
			} else {
				err = c.bootRamdisk(ctx, t, kind)
			}
		}
		if err == nil && !wait && c.agentBased(t) {
			// The agent is already up (fast track): fetch its steps
			// now, as Ironic's fast-track prepare_cleaning does; no
			// heartbeat in a wait state will (the cache was wiped
			// above).
			if url, _ := n.DriverInternalInfo[driver.InternalAgentURL].(string); url != "" {
				err = c.refreshAgentSteps(ctx, t, kind)
			}
		}
		if err != nil {
			return c.stepsFailed(ctx, t, kind, fmt.Sprintf("Failed to prepare node %s for %s: %s", n.UUID, kindVerb(kind), describeErr(err)), false)
		}
	}
	if wait {
		// The ramdisk is booting: the first heartbeat plans and starts the
		// run (Ironic's clean wait with an empty clean_step).
		return t.process(ctx, statemachine.EventWait, moveOpts{keepTarget: true})
	}
	return c.planAndRun(ctx, t, kind)
}

func userStepsKey(kind steps.Kind) string { return "anvil_requested_" + string(kind) + "_steps" }

// stepsFinishedKey marks, in driver_internal_info, a run whose steps all
// finished while the conductor tears it down (see finishSteps).
func stepsFinishedKey(kind steps.Kind) string { return "anvil_" + string(kind) + "_steps_finished" }

func kindVerb(kind steps.Kind) string {
	switch kind {
	case steps.Clean:
		return "cleaning"
	case steps.Deploy:
		return "deployment"
	}
	return "servicing"
}

// continueSteps resumes a run after a step finished asynchronously.
func (c *Conductor) continueSteps(ctx context.Context, t *task, kind steps.Kind) error {
	prog, err := readNodeProgress(t.node, kind)
	if err != nil {
		return c.stepsFailed(ctx, t, kind, describeErr(err), false)
	}
	prog, ok, err := c.revalidateOrFail(ctx, t, prog)
	if !ok {
		return err
	}
	return c.runActions(ctx, t, kind, c.planner().Continue(prog))
}

// runActions is the step loop: it carries out the planner's decisions
// until the run waits, holds, finishes or fails.
func (c *Conductor) runActions(ctx context.Context, t *task, kind steps.Kind, a steps.Action) error {
	n := t.node
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch a.Kind {
		case steps.Wait, steps.Hold, steps.AbortAfterStep, steps.Fail, steps.Abort:
		default:
			// Continuing after a wait: Ironic's continue_node_<kind> fires
			// resume first.
			if n.ProvisionState == waitState(kind) {
				if err := t.process(ctx, statemachine.EventResume, moveOpts{keepTarget: true}); err != nil {
					return err
				}
			}
		}
		if writesProgressFirst(a.Kind) {
			if err := writeNodeProgress(n, a.Progress); err != nil {
				switch a.Kind {
				case steps.Fail:
					c.log.Warn("cannot record failed progress", "node", n.UUID, "error", err)
				case steps.Abort:
					c.log.Warn("cannot record aborted progress", "node", n.UUID, "error", err)
				case steps.AbortAfterStep:
					return err
				default:
					return c.stepsFailed(ctx, t, kind, describeErr(err), false)
				}
			}
		}
		switch a.Kind {
		case steps.RunStep:
			// The progress naming the step and the history line of its
			// start commit together.
			if err := t.saveRecording(ctx, c.stepHistory(t, EventStepStart, kind, a.Step, "")); err != nil {
				return err
			}
			c.publishStep(t, EventStepStart, kind, a.Step, "")
			start := c.clock.Now()
			res, err := c.executeStep(ctx, t, kind, a.Step)
			out := c.classify(t, kind, res, err)
			prog := a.Progress
			if out.Kind == steps.StepWaiting {
				keys, _ := kind.Keys()
				if res.Polling {
					prog.Polling = true
				}
				if res.AgentCommand != "" {
					// Waits for the node's lock, which this run holds
					// until it has recorded the wait.
					c.watchCommand(ctx, agentOf(n), res.AgentCommand, kind, a.Step)
				}
				if v, ok := n.DriverInternalInfo[keys.Reboot].(bool); ok && v {
					prog.Reboot = true
				}
				if res.RebootRequested {
					prog.Reboot = true
				}
			}
			if out.Kind == steps.StepDone {
				c.metrics.stepDuration.WithLabelValues(string(kind), a.Step.Key()).Observe(c.clock.Now().Sub(start).Seconds())
				c.stepEvent(t, EventStepEnd, kind, a.Step, "")
				next, ok, err := c.mergeLiveAgentSteps(ctx, t, kind, prog)
				if !ok {
					return err
				}
				prog = next
			}
			if out.Kind == steps.StepFailed {
				c.metrics.stepFailures.WithLabelValues(string(kind), a.Step.Key()).Inc()
				c.stepEvent(t, EventStepEnd, kind, a.Step, out.Err)
			}
			a = c.planner().Decide(prog, out)
		case steps.PowerOn, steps.PowerOff, steps.PowerReboot:
			target := map[steps.ActionKind]driver.PowerState{steps.PowerOn: driver.PowerOn, steps.PowerOff: driver.PowerOff, steps.PowerReboot: driver.Reboot}[a.Kind]
			c.stepEvent(t, EventStepStart, kind, a.Step, "")
			if err := c.powerAction(ctx, t, target, 0); err != nil {
				c.stepEvent(t, EventStepEnd, kind, a.Step, describeErr(err))
				a = c.planner().Decide(a.Progress, steps.Outcome{Kind: steps.StepFailed, Node: n.UUID, Err: describeErr(err)})
				continue
			}
			c.stepEvent(t, EventStepEnd, kind, a.Step, "")
			a = c.planner().Decide(a.Progress, steps.Outcome{Kind: steps.StepDone})
		case steps.Hold:
			return t.process(ctx, statemachine.EventHold, moveOpts{keepTarget: true})
		case steps.Sleep:
			if a.Warning != "" {
				c.history(ctx, n.UUID, "wait step capped", "provisioning", a.Warning, baremetal.HistoryWarning)
			}
			if err := t.process(ctx, statemachine.EventWait, moveOpts{keepTarget: true}); err != nil {
				return err
			}
			select {
			case <-c.clock.After(time.Duration(a.Seconds) * time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
			if err := t.process(ctx, statemachine.EventResume, moveOpts{keepTarget: true}); err != nil {
				return err
			}
			a = c.planner().Decide(a.Progress, steps.Outcome{Kind: steps.StepDone})
		case steps.Wait:
			if n.ProvisionState == waitState(kind) {
				return t.save(ctx)
			}
			return t.process(ctx, statemachine.EventWait, moveOpts{keepTarget: true})
		case steps.RebootToFinishStep:
			err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
				if b := d.Boot(); b != nil {
					if err := b.PrepareRamdisk(ctx, v, c.agentRamdiskParams()); err != nil {
						return err
					}
				}
				return nil
			})
			if err == nil {
				c.bootPrepared(ctx, t)
				// The reboot flushes the agent's disks first and then
				// forgets its token (unless pre-generated), so the
				// rebooted agent obtains a new one.
				err = c.powerBootingAgent(ctx, t, driver.Reboot)
			}
			if err != nil {
				a = c.planner().Decide(a.Progress, steps.Outcome{Kind: steps.StepFailed, Node: n.UUID, Err: describeErr(err)})
				continue
			}
			if n.ProvisionState == waitState(kind) {
				return t.save(ctx)
			}
			return t.process(ctx, statemachine.EventWait, moveOpts{keepTarget: true})
		case steps.RefreshAndRestart, steps.RefreshAndRerun:
			if err := c.refreshAgentSteps(ctx, t, kind); err != nil {
				a = c.planner().Decide(a.Progress, steps.Outcome{Kind: steps.StepFailed, Node: n.UUID, Err: describeErr(err)})
				continue
			}
			if a.Kind == steps.RefreshAndRestart {
				if err := writeNodeProgress(n, a.Progress); err != nil {
					return c.stepsFailed(ctx, t, kind, describeErr(err), false)
				}
				return c.planAndRun(ctx, t, kind)
			}
			a = c.planner().Continue(a.Progress)
		case steps.AbortAfterStep:
			return t.save(ctx)
		case steps.Finish:
			return c.finishSteps(ctx, t, kind)
		case steps.Fail:
			return c.stepsFailed(ctx, t, kind, a.Message, a.Maintenance)
		case steps.Abort:
			return c.stepsFailed(ctx, t, kind, a.Message, false)
		default:
			return c.stepsFailed(ctx, t, kind, fmt.Sprintf("unexpected step action %v", a.Kind), false)
		}
	}
}

// writesProgressFirst says whether runActions records the action's
// progress in the node before acting on it: every action does but the
// agent step refreshes, which record it only once the refresh worked.
func writesProgressFirst(k steps.ActionKind) bool {
	switch k {
	case steps.RunStep, steps.PowerOn, steps.PowerOff, steps.PowerReboot, steps.Hold, steps.Sleep, steps.Wait,
		steps.RebootToFinishStep, steps.AbortAfterStep, steps.Finish, steps.Fail, steps.Abort:
		return true
	}
	return false
}

func waitState(kind steps.Kind) statemachine.State {
	switch kind {
	case steps.Clean:
		return statemachine.CleanWait
	case steps.Deploy:
		return statemachine.DeployWait
	}
	return statemachine.ServiceWait
}

func (c *Conductor) stepEvent(t *task, typ EventType, kind steps.Kind, s steps.Step, errText string) {
	c.addHistory(context.Background(), c.stepHistory(t, typ, kind, s, errText))
	c.publishStep(t, typ, kind, s, errText)
}

// stepHistory is the history entry of a step's start or end.
func (c *Conductor) stepHistory(t *task, typ EventType, kind steps.Kind, s steps.Step, errText string) *baremetal.HistoryEntry {
	msg := fmt.Sprintf("%s step %s %s", kind, s.Key(), map[EventType]string{EventStepStart: "started", EventStepEnd: "finished"}[typ])
	sev := baremetal.HistoryInfo
	if errText != "" {
		msg += ": " + errText
		sev = baremetal.HistoryError
	}
	// The store masks secrets in history messages itself.
	return &baremetal.HistoryEntry{NodeUUID: t.uuid(), Event: truncEvent(string(typ) + " " + s.Key()), EventType: string(kind),
		Message: msg, Severity: sev, Conductor: c.host}
}

// publishStep tells watchers a step started or ended.
func (c *Conductor) publishStep(t *task, typ EventType, kind steps.Kind, s steps.Step, errText string) {
	c.publish(Event{Type: typ, NodeUUID: t.uuid(), NodeName: t.node.Name, To: t.node.ProvisionState,
		StepKind: string(kind), Step: s.Key(), Error: errText})
}

// executeStep runs one step: out-of-band through the driver when the
// node's implementation of the step's interface declares it, in-band
// through the agent otherwise.
func (c *Conductor) executeStep(ctx context.Context, t *task, kind steps.Kind, s steps.Step) (res driver.StepResult, err error) {
	ctx, span := c.startNodeSpan(ctx, t.node, "step "+string(kind)+"."+s.Key(), attribute.String("anvil.step.kind", string(kind)),
		attribute.String("anvil.step.interface", s.Interface), attribute.String("anvil.step.name", s.Name))
	defer func() {
		span.SetAttributes(attribute.Bool("anvil.step.wait", res.Wait))
		if res.AgentCommand != "" {
			span.SetAttributes(attribute.String("anvil.agent.command_id", res.AgentCommand))
		}
		endSpan(span, err)
	}()
	return c.runStep(ctx, t, kind, s)
}

// runStep is executeStep without its span.
func (c *Conductor) runStep(ctx context.Context, t *task, kind steps.Kind, s steps.Step) (driver.StepResult, error) {
	d, err := t.driver()
	if err != nil {
		return driver.StepResult{}, err
	}
	impl := d.Interface(driver.Kind(s.Interface))
	if impl != nil && driver.HasStep(impl, kind, s.Name) {
		var res driver.StepResult
		err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			var err error
			res, err = d.ExecuteStep(ctx, v, kind, s)
			return err
		})
		if err != nil {
			return res, err
		}
		if res.Wait && res.RebootRequested {
			return res, c.bootRamdisk(ctx, t, kind)
		}
		if !res.Wait && kind == steps.Deploy && s.Interface == string(driver.KindDeploy) && c.agentBased(t) {
			return res, c.assistDeployStep(ctx, t, s.Name)
		}
		if !res.Wait && kind == steps.Deploy && s.Interface == string(driver.KindDeploy) && s.Name == "deploy" && c.ramdiskDeploy(t) {
			return res, c.bootRamdiskInstance(ctx, t)
		}
		return res, nil
	}
	if c.agentBased(t) {
		return c.executeAgentStep(ctx, t, kind, s)
	}
	return driver.StepResult{}, &driver.StepNotFoundError{Kind: driver.Kind(s.Interface), StepKind: string(kind), Step: s.Name}
}

// classify turns a step's result into the planner's outcome.
func (c *Conductor) classify(t *task, kind steps.Kind, res driver.StepResult, err error) steps.Outcome {
	n := t.node
	switch {
	case err == nil && res.Wait:
		return steps.Outcome{Kind: steps.StepWaiting}
	case err == nil:
		return steps.Outcome{Kind: steps.StepDone}
	case errors.Is(err, agentclient.ErrAgentBusy):
		return steps.Outcome{Kind: steps.AgentBusy}
	case errors.Is(err, agentclient.ErrConnectionFailed):
		_, hasURL := n.DriverInternalInfo[driver.InternalAgentURL].(string)
		return steps.Outcome{Kind: steps.AgentConnectionLost, Node: n.UUID, Err: describeErr(err), AgentURLMissing: !hasURL}
	case errors.Is(err, agentclient.ErrVersionMismatch):
		return steps.Outcome{Kind: steps.VersionMismatch}
	}
	if baremetal.IsStoreUnavailable(err) {
		// last_error says only that the database was unavailable and
		// points here for the details.
		c.log.Warn("step failed: the database is unavailable", "node", n.UUID, "error", err)
	}
	return steps.Outcome{Kind: steps.StepFailed, Node: n.UUID, Err: describeErr(err)}
}

// finishSteps tears the step environment down and fires the final event.
func (c *Conductor) finishSteps(ctx context.Context, t *task, kind steps.Kind) error {
	n := t.node
	ramdiskDisabled := runRamdiskDisabled(n, kind)
	_ = steps.Wipe(kind, ensureMap(n.DriverInternalInfo))
	delete(n.DriverInternalInfo, ramdiskDisabledKey(kind))
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	delete(n.DriverInternalInfo, userStepsKey(kind))
	*currentStepColumn(n, kind) = map[string]any{}
	// Record that every step is done before tearing the ramdisk down: a
	// conductor dying during the teardown leaves a node whose agent is
	// gone, and its new owner must finish the run, not re-check (or
	// re-run) the last step.
	n.DriverInternalInfo[stepsFinishedKey(kind)] = true
	if err := t.save(ctx); err != nil {
		return err
	}
	delete(n.DriverInternalInfo, stepsFinishedKey(kind))
	if kind != steps.Deploy {
		// Tearing the steps' boot down reads the node's ports and
		// records boot stages: a database outage delays it rather than
		// failing the node.
		err := c.retryStoreCall(ctx, t, "tearing down the "+kindVerb(kind)+" boot", func() error {
			return t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
				if sp, ok := driver.As[driver.StepPreparer](d.Deploy()); ok {
					return sp.TearDownSteps(ctx, v, kind)
				}
				return nil
			})
		})
		switch {
		case err != nil:
		case kind == steps.Service:
			// The instance boots again, unchanged (Ironic's
			// tear_down_inband_service).
			err = c.leaveServicing(ctx, t, ramdiskDisabled)
		case c.agentBased(t) && !c.fastTrackable(t) && !ramdiskDisabled:
			err = c.retryStoreCall(ctx, t, "shutting the "+kindVerb(kind)+" ramdisk down", func() error { return c.shutdownRamdisk(ctx, t, kind) })
			if err == nil && n.DisablePowerOff {
				// Not powered off: reset out of the ramdisk, whose
				// boot is gone (Ironic's tear_down_inband_cleaning).
				err = c.powerAction(ctx, t, driver.Reboot, 0)
			}
		}
		if err != nil {
			return c.stepsFailed(ctx, t, kind, fmt.Sprintf("Failed to tear down %s for node %s: %s", kindVerb(kind), n.UUID, describeErr(err)), false)
		}
	}
	if !c.fastTrackable(t) {
		wipeAgent(n)
	}
	switch kind {
	case steps.Clean:
		if n.TargetProvisionState == statemachine.Manageable || n.Retired {
			return t.process(ctx, statemachine.EventManage, moveOpts{})
		}
		return t.process(ctx, statemachine.EventDone, moveOpts{})
	case steps.Deploy:
		// An enabled console starts as the node goes active; a console
		// that does not start fails nothing but itself.
		c.startConsoleInDeploy(ctx, t)
		return t.process(ctx, statemachine.EventDone, moveOpts{})
	default:
		return t.process(ctx, statemachine.EventDone, moveOpts{})
	}
}

// stepsFailed is the error handler of clean, deploy and service runs.
func (c *Conductor) stepsFailed(ctx context.Context, t *task, kind steps.Kind, msg string, maintenance bool) error {
	n := t.node
	if kind == steps.Clean && maintenance {
		n.Maintenance, n.Fault = true, "clean failure"
		n.MaintenanceReason = msg
	}
	if kind != steps.Deploy {
		_ = t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			if sp, ok := driver.As[driver.StepPreparer](d.Deploy()); ok {
				return sp.TearDownSteps(ctx, v, kind)
			}
			return nil
		})
	}
	if c.agentBased(t) && kind != steps.Deploy && !runRamdiskDisabled(n, kind) {
		// Ironic tears the ramdisk environment down on failure too; with
		// disable_ramdisk none was booted, and the instance keeps
		// running.
		if err := c.shutdownRamdisk(ctx, t, kind); err != nil {
			c.log.Warn("ramdisk not torn down after failure", "node", n.UUID, "error", err)
		}
	}
	wipeAgent(n)
	t.fail(ctx, msg, true)
	if kind == steps.Service && n.ProvisionState == statemachine.ServiceFailed {
		return nil
	}
	return fmt.Errorf("node %s: %s failed: %s", n.UUID, kind, msg)
}

// runRamdiskDisabled reports whether the clean or service run was asked
// with disable_ramdisk (its <kind>_disable_ramdisk flag).
func runRamdiskDisabled(n *baremetal.Node, kind steps.Kind) bool {
	if v, _ := n.DriverInternalInfo[ramdiskDisabledKey(kind)].(bool); v {
		return true
	}
	keys, ok := kind.Keys()
	if !ok || keys.DisableRamdisk == "" {
		return false
	}
	v, _ := n.DriverInternalInfo[keys.DisableRamdisk].(bool)
	return v
}

// ramdiskDisabledKey marks, in driver_internal_info, a clean or service
// run started with disable_ramdisk until its tear-down.
func ramdiskDisabledKey(kind steps.Kind) string { return "anvil_" + string(kind) + "_ramdisk_disabled" }

// leaveServicing returns a serviced node to its instance, as Ironic's
// tear_down_inband_service does: for an agent-based deploy interface the
// service ramdisk is powered off and its boot and network removed, the
// tenant network bound again, the instance's boot prepared (the boot
// interface, the disk as persistent boot device) and the node powered
// on. With disable_ramdisk the instance never stopped for the ramdisk:
// the node is only powered on if a step left it off. Interfaces that are
// not agent based (fake) have nothing to tear down.
func (c *Conductor) leaveServicing(ctx context.Context, t *task, ramdiskDisabled bool) error {
	if !c.agentBased(t) {
		return nil
	}
	if !ramdiskDisabled {
		if t.node.DisablePowerOff {
			// The service ramdisk cannot be powered off: its agent is
			// locked down first, if it still answers (Ironic's
			// tear_down_service).
			if err := c.lockdownAgent(ctx, t, false); err != nil {
				return err
			}
		}
		if err := c.shutdownRamdisk(ctx, t, steps.Service); err != nil {
			return err
		}
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
			if m := d.Management(); m != nil {
				return m.SetBootDevice(ctx, v, driver.BootDisk, true)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if t.node.DisablePowerOff && !ramdiskDisabled {
		return c.powerAction(ctx, t, driver.Reboot, 0)
	}
	if t.node.PowerState == driver.PowerOn {
		return nil
	}
	return c.powerAction(ctx, t, driver.PowerOn, 0)
}
