package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/configdrive"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/jsonexact"
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

// AgentBased is an optional capability of a deploy interface whose clean,
// deploy and service steps run partly in-band through the ramdisk agent:
// the conductor then merges the agent's steps with the driver's and
// processes agent heartbeats for the node.
type AgentBased interface {
	AgentBased() bool
}

func (c *Conductor) planner() *steps.Planner {
	c.plannerOnce.Do(func() {
		p, err := steps.NewPlanner(steps.Config{
			CleanPriorityOverrides: c.opts.CleanStepPriorityOverride,
			DisableAutomatedClean:  c.opts.DisableAutomatedClean,
			MaxWaitStepSeconds:     int(c.opts.MaxConductorWaitStep / time.Second),
		})
		if err != nil {
			c.log.Error("invalid step configuration; using defaults", "error", err)
			p, _ = steps.NewPlanner(steps.Config{})
		}
		warnIgnoredOverrides(c.log, p)
		c.plan = p
	})
	return c.plan
}

func (c *Conductor) agentBased(t *task) bool {
	d, err := t.driver()
	if err != nil {
		return false
	}
	ab, ok := d.Deploy().(AgentBased)
	return ok && ab.AgentBased()
}

// stepSource collects the node's driver steps and cached agent steps.
func (c *Conductor) stepSource(_ context.Context, t *task, kind steps.Kind) (steps.Source, error) {
	d, err := t.driver()
	if err != nil {
		return steps.Source{}, err
	}
	src := steps.Source{Driver: map[string][]steps.Step{}}
	for _, s := range d.Steps(kind) {
		src.Driver[s.Interface] = append(src.Driver[s.Interface], s)
	}
	if c.agentBased(t) {
		cache, err := steps.ReadAgentCache(kind, t.node.DriverInternalInfo)
		if err != nil {
			return steps.Source{}, err
		}
		src.Agent = cache
		src.InBand = inBandInterfaces(d)
	}
	return src, nil
}

func stepKindOf(s statemachine.State) (steps.Kind, bool) {
	switch s {
	case statemachine.Cleaning, statemachine.CleanWait, statemachine.CleanHold, statemachine.CleanFailed:
		return steps.Clean, true
	case statemachine.Deploying, statemachine.DeployWait, statemachine.DeployHold, statemachine.DeployFailed:
		return steps.Deploy, true
	case statemachine.Servicing, statemachine.ServiceWait, statemachine.ServiceHold, statemachine.ServiceFailed:
		return steps.Service, true
	}
	return "", false
}

func currentStepColumn(n *baremetal.Node, kind steps.Kind) *map[string]any {
	switch kind {
	case steps.Clean:
		return &n.CleanStep
	case steps.Deploy:
		return &n.DeployStep
	default:
		return &n.ServiceStep
	}
}

func readNodeProgress(n *baremetal.Node, kind steps.Kind) (steps.Progress, error) {
	var cur *steps.Step
	if col := *currentStepColumn(n, kind); len(col) > 0 {
		b, err := json.Marshal(col)
		if err != nil {
			return steps.Progress{}, err
		}
		var s steps.Step
		if err := json.Unmarshal(b, &s); err != nil {
			return steps.Progress{}, err
		}
		cur = &s
	}
	p, err := steps.ReadProgress(kind, n.DriverInternalInfo, cur)
	if err != nil {
		return p, err
	}
	p.Manual = kind == steps.Clean && n.TargetProvisionState == string(statemachine.Manageable)
	return p, nil
}

func writeNodeProgress(n *baremetal.Node, p steps.Progress) error {
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	if err := p.Write(n.DriverInternalInfo); err != nil {
		return err
	}
	col := currentStepColumn(n, p.Kind)
	if p.Current == nil || p.Current.IsZero() {
		*col = map[string]any{}
		return nil
	}
	b, err := json.Marshal(p.Current)
	if err != nil {
		return err
	}
	var m map[string]any
	// The step's arguments keep their numbers exactly.
	if err := jsonexact.Decode(b, &m); err != nil {
		return err
	}
	*col = m
	return nil
}

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
	default:
		t.consumeIntent()
		err = fmt.Errorf("baremetal: node %s: unknown intent %q", t.uuid(), in.Op)
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
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		p := d.Power()
		if p == nil {
			return fmt.Errorf("no power interface")
		}
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
	t.node.PowerState = string(ps)
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
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		in := d.Inspect()
		if in == nil {
			return fmt.Errorf("no inspect interface")
		}
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
	t.node.InspectionFinishedAt = c.clock.Now().UTC()
	return t.process(ctx, statemachine.EventDone, moveOpts{})
}

// doClean starts automated (provide, tear-down) or manual cleaning.
func (c *Conductor) doClean(ctx context.Context, t *task, in intent) error {
	t.consumeIntent()
	n := t.node
	manual := n.TargetProvisionState == string(statemachine.Manageable)
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

// startSteps prepares the environment for a clean or service run and
// starts it: synchronously when no ramdisk is needed or it is already up,
// otherwise by waiting for the agent's first heartbeat.
func (c *Conductor) startSteps(ctx context.Context, t *task, kind steps.Kind, user []steps.Step, disableRamdisk bool) error {
	n := t.node
	manual := kind == steps.Clean && n.TargetProvisionState == string(statemachine.Manageable)
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
			err = c.bootRamdisk(ctx, t, kind)
		}
		if err == nil && !wait && c.agentBased(t) {
			// The agent is already up (fast track): fetch its steps
			// now, as Ironic's fast-track prepare_cleaning does; no
			// heartbeat in a wait state will (the cache was wiped
			// above).
			if url, _ := n.DriverInternalInfo["agent_url"].(string); url != "" {
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

// planAndRun computes the step list (with the agent's steps when known)
// and runs it from the first step.
func (c *Conductor) planAndRun(ctx context.Context, t *task, kind steps.Kind) error {
	n := t.node
	src, err := c.stepSource(ctx, t, kind)
	if err != nil {
		return c.stepsFailed(ctx, t, kind, describeErr(err), false)
	}
	user, err := stepsFromJSON(n.DriverInternalInfo[userStepsKey(kind)])
	if err != nil {
		return c.stepsFailed(ctx, t, kind, describeErr(err), false)
	}
	keys, _ := kind.Keys()
	disable, _ := n.DriverInternalInfo[keys.DisableRamdisk].(bool)
	var pl steps.Plan
	switch {
	case kind == steps.Clean && n.TargetProvisionState != string(statemachine.Manageable):
		pl, err = c.planner().AutomatedClean(steps.AutomatedCleanRequest{Source: src, NodeAutomatedClean: n.AutomatedClean})
	case kind == steps.Clean:
		pl, err = c.planner().ManualClean(steps.ManualRequest{Source: src, Steps: user, DisableRamdisk: disable})
	case kind == steps.Service:
		pl, err = c.planner().Service(steps.ManualRequest{Source: src, Steps: user, DisableRamdisk: disable})
	default:
		pl, err = c.planner().Deploy(steps.DeployRequest{Source: src, UserSteps: user,
			Templates: c.templates(), InstanceTraits: instanceTraits(n), SkipMissing: c.agentBased(t)})
	}
	if err != nil {
		return c.stepsFailed(ctx, t, kind, planFailedMessage(kind, n.UUID, describeErr(err)), false)
	}
	if pl.Skip {
		return c.finishSteps(ctx, t, kind)
	}
	prog := pl.Progress()
	prog.Manual = kind == steps.Clean && n.TargetProvisionState == string(statemachine.Manageable)
	if kind == steps.Deploy && c.agentBased(t) && len(src.Agent) == 0 {
		// The agent has not reported its in-band steps yet: the plan is
		// re-validated and recomputed on the first continuation after it
		// has (Ironic's steps_validated).
		prog.StepsValidated = false
	}
	return c.runActions(ctx, t, kind, c.planner().Start(prog))
}

// revalidateDeploySteps is Ironic's validation of the final deploy step
// list: on the first continuation after the agent reported its in-band
// deploy steps, the user and template steps are validated again without
// skipping unknown steps, and the plan is recomputed with the agent's
// steps so user in-band steps run at their priority. The current step
// keeps its place in the new list. Progress comes back unchanged while
// the steps are validated already or the agent's steps are not known.
func (c *Conductor) revalidateDeploySteps(ctx context.Context, t *task, prog steps.Progress) (steps.Progress, error) {
	if prog.Kind != steps.Deploy || prog.StepsValidated || !c.agentBased(t) {
		return prog, nil
	}
	src, err := c.stepSource(ctx, t, steps.Deploy)
	if err != nil {
		return prog, err
	}
	if len(src.Agent) == 0 {
		return prog, nil
	}
	n := t.node
	pl, err := c.planner().Deploy(steps.DeployRequest{Source: src, UserSteps: prog.UserSteps,
		Templates: c.templates(), InstanceTraits: instanceTraits(n)})
	if err != nil {
		return prog, err
	}
	out := prog
	out.Steps = pl.Progress().Steps
	out.StepsValidated = true
	if prog.Current != nil {
		i := stepIndex(out.Steps, *prog.Current)
		if i < 0 {
			return prog, fmt.Errorf("%w: node %s: current deploy step %s is not in the recomputed deploy steps",
				steps.ErrInvalidProgress, n.UUID, prog.Current.Key())
		}
		out.Index = &i
	}
	return out, nil
}

// mergeLiveAgentSteps fetches the deploy steps of an agent that is
// already up (fast track: deploy.deploy finished without booting the
// ramdisk, so no heartbeat in wait call-back fetched them) and merges them
// into the plan before the next step, as Ironic's fast-track deploy
// refreshes the in-band steps and re-validates. Without it write_image ran
// before the agent's steps were known and an agent deploy step of
// non-zero priority never ran. It does nothing once the steps are
// validated, for other kinds, or while no agent is recorded (the
// heartbeat path fetches them then). ok is false when the run failed (err
// is the failure's).
func (c *Conductor) mergeLiveAgentSteps(ctx context.Context, t *task, kind steps.Kind, prog steps.Progress) (steps.Progress, bool, error) {
	if kind != steps.Deploy || prog.StepsValidated || !c.agentBased(t) {
		return prog, true, nil
	}
	if url, _ := t.node.DriverInternalInfo["agent_url"].(string); url == "" {
		return prog, true, nil
	}
	if err := c.refreshAgentSteps(ctx, t, steps.Deploy); err != nil {
		return prog, false, c.stepsFailed(ctx, t, steps.Deploy,
			fmt.Sprintf("Failed to get deploy steps from the agent of node %s: %s", t.uuid(), describeErr(err)), false)
	}
	return c.revalidateOrFail(ctx, t, prog)
}

// stepIndex finds a step by interface and name.
func stepIndex(list []steps.Step, s steps.Step) int {
	for i, x := range list {
		if x.Interface == s.Interface && x.Name == s.Name {
			return i
		}
	}
	return -1
}

// revalidateOrFail runs revalidateDeploySteps and fails the deploy with
// the validation error when the final step list is invalid.
func (c *Conductor) revalidateOrFail(ctx context.Context, t *task, prog steps.Progress) (steps.Progress, bool, error) {
	next, err := c.revalidateDeploySteps(ctx, t, prog)
	if err != nil {
		reason := describeErr(err)
		if ve := (*steps.ValidationError)(nil); errors.As(err, &ve) {
			reason = baremetal.MaskText(ve.Message())
		}
		return prog, false, c.stepsFailed(ctx, t, steps.Deploy, fmt.Sprintf("Failed to validate the final deploy steps list for node %s: %s",
			t.node.UUID, reason), false)
	}
	return next, true, nil
}

func (c *Conductor) templates() []steps.Template {
	out := make([]steps.Template, 0, len(c.opts.DeployTemplates))
	for _, dt := range c.opts.DeployTemplates {
		tp := steps.Template{Name: dt.Name}
		for _, s := range dt.Steps {
			tp.Steps = append(tp.Steps, steps.Step{Interface: s.Interface, Name: s.Step, Args: s.Args, Priority: s.Priority})
		}
		out = append(out, tp)
	}
	return out
}

func instanceTraits(n *baremetal.Node) []string {
	raw, _ := n.InstanceInfo["traits"].([]any)
	var out []string
	for _, v := range raw {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
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
			if statemachine.State(n.ProvisionState) == waitState(kind) {
				if err := t.process(ctx, statemachine.EventResume, moveOpts{keepTarget: true}); err != nil {
					return err
				}
			}
		}
		switch a.Kind {
		case steps.RunStep:
			if err := writeNodeProgress(n, a.Progress); err != nil {
				return c.stepsFailed(ctx, t, kind, describeErr(err), false)
			}
			if err := t.save(ctx); err != nil {
				return err
			}
			c.stepEvent(t, EventStepStart, kind, a.Step, "")
			start := c.clock.Now()
			res, err := c.executeStep(ctx, t, kind, a.Step)
			out := c.classify(t, kind, res, err)
			prog := a.Progress
			if out.Kind == steps.StepWaiting {
				keys, _ := kind.Keys()
				if res.Polling {
					prog.Polling = true
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
			if err := writeNodeProgress(n, a.Progress); err != nil {
				return c.stepsFailed(ctx, t, kind, describeErr(err), false)
			}
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
			if err := writeNodeProgress(n, a.Progress); err != nil {
				return c.stepsFailed(ctx, t, kind, describeErr(err), false)
			}
			return t.process(ctx, statemachine.EventHold, moveOpts{keepTarget: true})
		case steps.Sleep:
			if err := writeNodeProgress(n, a.Progress); err != nil {
				return c.stepsFailed(ctx, t, kind, describeErr(err), false)
			}
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
			if err := writeNodeProgress(n, a.Progress); err != nil {
				return c.stepsFailed(ctx, t, kind, describeErr(err), false)
			}
			if statemachine.State(n.ProvisionState) == waitState(kind) {
				return t.save(ctx)
			}
			return t.process(ctx, statemachine.EventWait, moveOpts{keepTarget: true})
		case steps.RebootToFinishStep:
			if err := writeNodeProgress(n, a.Progress); err != nil {
				return c.stepsFailed(ctx, t, kind, describeErr(err), false)
			}
			err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
				if b := d.Boot(); b != nil {
					if err := b.PrepareRamdisk(ctx, v, c.agentRamdiskParams()); err != nil {
						return err
					}
				}
				return nil
			})
			if err == nil {
				// The reboot flushes the agent's disks first and then
				// forgets its token (unless pre-generated), so the
				// rebooted agent obtains a new one.
				err = c.powerBootingAgent(ctx, t, driver.Reboot)
			}
			if err != nil {
				a = c.planner().Decide(a.Progress, steps.Outcome{Kind: steps.StepFailed, Node: n.UUID, Err: describeErr(err)})
				continue
			}
			if statemachine.State(n.ProvisionState) == waitState(kind) {
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
			if err := writeNodeProgress(n, a.Progress); err != nil {
				return err
			}
			return t.save(ctx)
		case steps.Finish:
			if err := writeNodeProgress(n, a.Progress); err != nil {
				return c.stepsFailed(ctx, t, kind, describeErr(err), false)
			}
			return c.finishSteps(ctx, t, kind)
		case steps.Fail:
			if err := writeNodeProgress(n, a.Progress); err != nil {
				c.log.Warn("cannot record failed progress", "node", n.UUID, "error", err)
			}
			return c.stepsFailed(ctx, t, kind, a.Message, a.Maintenance)
		case steps.Abort:
			if err := writeNodeProgress(n, a.Progress); err != nil {
				c.log.Warn("cannot record aborted progress", "node", n.UUID, "error", err)
			}
			return c.stepsFailed(ctx, t, kind, a.Message, false)
		default:
			return c.stepsFailed(ctx, t, kind, fmt.Sprintf("unexpected step action %v", a.Kind), false)
		}
	}
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
	msg := fmt.Sprintf("%s step %s %s", kind, s.Key(), map[EventType]string{EventStepStart: "started", EventStepEnd: "finished"}[typ])
	sev := baremetal.HistoryInfo
	if errText != "" {
		msg += ": " + errText
		sev = baremetal.HistoryError
	}
	c.history(context.Background(), t.uuid(), string(typ)+" "+s.Key(), string(kind), msg, sev)
	c.publish(Event{Type: typ, NodeUUID: t.uuid(), NodeName: t.node.Name, To: t.node.ProvisionState,
		StepKind: string(kind), Step: s.Key(), Error: errText})
}

// executeStep runs one step: out-of-band through the driver when the
// node's implementation of the step's interface declares it, in-band
// through the agent otherwise.
func (c *Conductor) executeStep(ctx context.Context, t *task, kind steps.Kind, s steps.Step) (driver.StepResult, error) {
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
		_, hasURL := n.DriverInternalInfo["agent_url"].(string)
		return steps.Outcome{Kind: steps.AgentConnectionLost, Node: n.UUID, Err: describeErr(err), AgentURLMissing: !hasURL}
	case errors.Is(err, agentclient.ErrVersionMismatch):
		return steps.Outcome{Kind: steps.VersionMismatch}
	}
	return steps.Outcome{Kind: steps.StepFailed, Node: n.UUID, Err: describeErr(err)}
}

// finishSteps tears the step environment down and fires the final event.
func (c *Conductor) finishSteps(ctx context.Context, t *task, kind steps.Kind) error {
	n := t.node
	_ = steps.Wipe(kind, ensureMap(n.DriverInternalInfo))
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
		err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			if sp, ok := driver.As[driver.StepPreparer](d.Deploy()); ok {
				return sp.TearDownSteps(ctx, v, kind)
			}
			return nil
		})
		if err == nil && c.agentBased(t) && !c.fastTrackable(t) {
			err = c.shutdownRamdisk(ctx, t, kind)
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
		if n.TargetProvisionState == string(statemachine.Manageable) || n.Retired {
			return t.process(ctx, statemachine.EventManage, moveOpts{})
		}
		return t.process(ctx, statemachine.EventDone, moveOpts{})
	case steps.Deploy:
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
	if c.agentBased(t) && kind != steps.Deploy {
		// Ironic tears the ramdisk environment down on failure too.
		if err := c.shutdownRamdisk(ctx, t, kind); err != nil {
			c.log.Warn("ramdisk not torn down after failure", "node", n.UUID, "error", err)
		}
	}
	wipeAgent(n)
	t.fail(ctx, msg, true)
	if kind == steps.Service && n.ProvisionState == string(statemachine.ServiceFailed) {
		return nil
	}
	return fmt.Errorf("baremetal: node %s: %s failed: %s", n.UUID, kind, msg)
}

// wipeAgent forgets the agent's URL and token, as Ironic's
// wipe_token_and_url does.
func wipeAgent(n *baremetal.Node) {
	for _, k := range []string{"agent_url", "agent_secret_token", "agent_verify_ca", "agent_secret_token_pregenerated"} {
		delete(n.DriverInternalInfo, k)
	}
}

func (c *Conductor) fastTrackable(t *task) bool {
	n := t.node
	enabled := c.agent.FastTrack
	if v, ok := n.DriverInfo["fast_track"]; ok {
		switch x := v.(type) {
		case bool:
			enabled = x
		case string:
			enabled = x == "true" || x == "True" || x == "1"
		}
	}
	return enabled && n.LastError == ""
}

func (c *Conductor) doDeploy(ctx context.Context, t *task, in intent) error {
	t.consumeIntent()
	n := t.node
	_ = steps.Wipe(steps.Deploy, ensureMap(n.DriverInternalInfo))
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	if user, ok := in.Args["deploy_steps"]; ok && user != nil {
		n.DriverInternalInfo[userStepsKey(steps.Deploy)] = user
	}
	if m, ok := n.InstanceInfo["configdrive"].(map[string]any); ok {
		b, _ := json.Marshal(m)
		v, err := configdrive.Parse(b)
		if err == nil {
			var s string
			s, err = configdrive.Build(ctx, configdrive.Node{UUID: n.UUID, Name: n.Name}, *v.Contents)
			if err == nil {
				n.InstanceInfo["configdrive"] = s
			}
		}
		if err != nil {
			return c.stepsFailed(ctx, t, steps.Deploy, fmt.Sprintf("Failed to build the config drive for node %s: %s", n.UUID, describeErr(err)), false)
		}
	}
	c.dropStaleAgent(ctx, t)
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		dep := d.Deploy()
		if dep == nil {
			return fmt.Errorf("no deploy interface")
		}
		if err := dep.Validate(ctx, v); err != nil {
			return err
		}
		return dep.Prepare(ctx, v)
	})
	if err != nil {
		return c.stepsFailed(ctx, t, steps.Deploy, fmt.Sprintf("Failed to prepare to deploy: %s", describeErr(err)), false)
	}
	// This conductor prepared the node's local state (Ironic's
	// do_node_deploy records conductor_affinity), so SyncLocalState on
	// another owner re-prepares it only if that is a different conductor.
	if c.record != nil {
		n.ConductorAffinity = c.record.ID
	}
	return c.planAndRun(ctx, t, steps.Deploy)
}

func (c *Conductor) doTearDown(ctx context.Context, t *task) error {
	t.consumeIntent()
	n := t.node
	if url, _ := n.DriverInternalInfo["agent_url"].(string); url != "" && n.PowerState == string(driver.PowerOn) {
		// An agent still runs (a failed deploy): shut it down in
		// Ironic's order before the node is torn down and rebooted.
		if err := c.powerOffAgent(ctx, t); err != nil {
			msg := fmt.Sprintf("Failed to tear down. Error: %s", describeErr(err))
			t.fail(ctx, msg, false)
			return err
		}
	}
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		dep := d.Deploy()
		if dep == nil {
			return fmt.Errorf("no deploy interface")
		}
		if err := dep.TearDown(ctx, v); err != nil {
			return err
		}
		if b := d.Boot(); b != nil {
			if err := b.CleanUpInstance(ctx, v); err != nil {
				return err
			}
		}
		return dep.CleanUp(ctx, v)
	})
	if err != nil {
		msg := fmt.Sprintf("Failed to tear down. Error: %s", describeErr(err))
		t.fail(ctx, msg, false)
		return err
	}
	_ = t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		if p := d.Power(); p != nil {
			if ps, err := p.GetPowerState(ctx, v); err == nil {
				n.PowerState = string(ps)
			}
		}
		return nil
	})
	n.InstanceInfo = map[string]any{}
	n.InstanceUUID = ""
	wipeAgent(n)
	_ = steps.Wipe(steps.Deploy, n.DriverInternalInfo)
	n.DeployStep = map[string]any{}
	if err := t.process(ctx, statemachine.EventClean, moveOpts{work: true}); err != nil {
		return err
	}
	return c.startSteps(ctx, t, steps.Clean, nil, false)
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
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		dep := d.Deploy()
		if dep == nil {
			return fmt.Errorf("no deploy interface")
		}
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

func (c *Conductor) doRescue(ctx context.Context, t *task) error {
	t.consumeIntent()
	var res driver.StepResult
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		r := d.Rescue()
		if r == nil {
			return fmt.Errorf("no rescue interface")
		}
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
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		r := d.Rescue()
		if r == nil {
			return fmt.Errorf("no rescue interface")
		}
		return r.Unrescue(ctx, v)
	})
	if err != nil {
		t.fail(ctx, fmt.Sprintf("Failed to unrescue node %s: %s", t.uuid(), describeErr(err)), false)
		return err
	}
	delete(t.node.InstanceInfo, "rescue_password")
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
		err = t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			if sp, ok := driver.As[driver.StepPreparer](d.Deploy()); ok {
				return sp.TearDownSteps(ctx, v, steps.Service)
			}
			return nil
		})
		_ = steps.Wipe(steps.Service, ensureMap(n.DriverInternalInfo))
		n.ServiceStep = map[string]any{}
	case statemachine.RescueWait:
		err = t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			if r := d.Rescue(); r != nil {
				return r.CleanUp(ctx, v)
			}
			return nil
		})
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

// powerAction drives the node's power and records the result in the node
// (unsaved): power_state, and the agent token and URL wiped by power-off
// and reboot.
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
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var got driver.PowerState
	err := t.call(pctx, func(d *driver.Driver, v *driver.Task) error {
		p := d.Power()
		if p == nil {
			return fmt.Errorf("no power interface")
		}
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

// powerChanged records a finished power action in the node (unsaved): the
// power state read afterwards and, unless the node was powered on, the
// agent's URL, token and cached steps forgotten (unless the token is
// pre-generated), and publishes it.
func (c *Conductor) powerChanged(t *task, target, got driver.PowerState) {
	n := t.node
	n.PowerState = string(got)
	if target != driver.PowerOn {
		if _, pre := n.DriverInternalInfo["agent_secret_token_pregenerated"]; !pre {
			n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
			for _, k := range []string{"agent_url", "agent_secret_token", "agent_verify_ca", "agent_cached_clean_steps",
				"agent_cached_deploy_steps", "agent_cached_service_steps"} {
				delete(n.DriverInternalInfo, k)
			}
		}
	}
	c.publish(Event{Type: EventPower, NodeUUID: n.UUID, NodeName: n.Name, To: n.ProvisionState, PowerState: n.PowerState})
}

func networkPurpose(kind steps.Kind) driver.NetworkPurpose {
	switch kind {
	case steps.Clean:
		return driver.NetworkCleaning
	case steps.Service:
		return driver.NetworkServicing
	}
	return driver.NetworkProvisioning
}

// bootRamdisk boots the node into the agent ramdisk for an agent-based
// run: network, ramdisk boot, token wiped, reboot (or power on).
func (c *Conductor) bootRamdisk(ctx context.Context, t *task, kind steps.Kind) error {
	if err := c.prepareRamdiskBoot(ctx, t, networkPurpose(kind), c.agentRamdiskParams()); err != nil {
		return err
	}
	return c.powerIntoRamdisk(ctx, t)
}

// prepareRamdiskBoot readies the node to boot the agent ramdisk for
// purpose: its network, the boot interface's ramdisk (with params, the
// ramdisk's kernel parameters, and the boot device the boot interface
// chooses and sets), and the previous
// agent's token and URL forgotten (unless the token is pre-generated), so
// the booting agent finds no stale token.
func (c *Conductor) prepareRamdiskBoot(ctx context.Context, t *task, purpose driver.NetworkPurpose, params map[string]any) error {
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		if nw := d.Network(); nw != nil {
			if err := nw.AddNetwork(ctx, v, purpose); err != nil {
				return err
			}
		}
		if b := d.Boot(); b != nil {
			// The boot interface sets the boot device itself (PXE for
			// network boot, CD for virtual media), as in Ironic: a PXE
			// override here would undo a virtual-media boot.
			if err := b.PrepareRamdisk(ctx, v, params); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	n := t.node
	if _, pre := n.DriverInternalInfo["agent_secret_token_pregenerated"]; !pre {
		delete(n.DriverInternalInfo, "agent_secret_token")
	}
	delete(n.DriverInternalInfo, "agent_url")
	return nil
}

// powerIntoRamdisk reboots the node (or powers it on) once its ramdisk
// boot is prepared.
func (c *Conductor) powerIntoRamdisk(ctx context.Context, t *task) error {
	if t.node.PowerState == string(driver.PowerOn) {
		return c.powerBootingAgent(ctx, t, driver.Reboot)
	}
	return c.powerBootingAgent(ctx, t, driver.PowerOn)
}

// shutdownRamdisk ends an agent-based clean or service run: power off and
// forget the ramdisk boot and the run's network.
func (c *Conductor) shutdownRamdisk(ctx context.Context, t *task, kind steps.Kind) error {
	if err := c.powerAction(ctx, t, driver.PowerOff, 0); err != nil {
		return err
	}
	return t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		if b := d.Boot(); b != nil {
			if err := b.CleanUpRamdisk(ctx, v); err != nil {
				return err
			}
		}
		if nw := d.Network(); nw != nil {
			return nw.RemoveNetwork(ctx, v, networkPurpose(kind))
		}
		return nil
	})
}

// assistDeployStep does the cross-interface part of the direct deploy
// interface's steps, as Ironic's agent deploy does through task.driver.
func (c *Conductor) assistDeployStep(ctx context.Context, t *task, step string) error {
	switch step {
	case "prepare_instance_boot":
		return t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
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
	case "tear_down_agent":
		if err := c.powerOffAgent(ctx, t); err != nil {
			return err
		}
		return t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			if b := d.Boot(); b != nil {
				return b.CleanUpRamdisk(ctx, v)
			}
			return nil
		})
	case "switch_to_tenant_network":
		return t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			if nw := d.Network(); nw != nil {
				if err := nw.RemoveNetwork(ctx, v, driver.NetworkProvisioning); err != nil {
					return err
				}
				return nw.AddNetwork(ctx, v, driver.NetworkTenant)
			}
			return nil
		})
	case "boot_instance":
		return c.powerAction(ctx, t, driver.PowerOn, 0)
	}
	return nil
}
