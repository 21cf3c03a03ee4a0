package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/jsonexact"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
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

// RamdiskDeployer is implemented by a deploy interface whose instance is
// booted by the boot interface rather than written to disk (Ironic's
// "ramdisk"): after its deploy step the conductor powers the node off
// (unless disable_power_off), binds the tenant network, prepares the
// instance's boot and powers the node on (reboots it).
type RamdiskDeployer interface {
	RamdiskDeploy() bool
}

// DeployAutodetector is implemented by a deploy interface that picks,
// per deployment, the interface the node really deploys with (Ironic's
// "autodetect"): the conductor switches the node's deploy_interface to
// Detect's answer when the deploy starts and back when the instance is
// torn down.
type DeployAutodetector interface {
	Detect(t *driver.Task) (string, error)
}

// originalDeployInterfaceKey is Ironic's driver_internal_info key for
// the deploy interface autodetect switched away from.
const originalDeployInterfaceKey = "original_deploy_interface"

// switchDeployInterface switches a node whose deploy interface is an
// autodetector to the interface it detects for the node's instance. The
// node is not saved.
func (c *Conductor) switchDeployInterface(ctx context.Context, t *task) error {
	d, err := t.driver()
	if err != nil {
		return err
	}
	ad, ok := d.Deploy().(DeployAutodetector)
	if !ok {
		return nil
	}
	v, err := t.view(ctx)
	if err != nil {
		return err
	}
	name, err := ad.Detect(v)
	if err != nil {
		return err
	}
	n := t.node
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[originalDeployInterfaceKey] = n.DeployInterface
	c.log.Info("autodetect switching deploy interface", "node", n.UUID, "from", n.DeployInterface, "to", name)
	n.DeployInterface = name
	t.drv = nil
	return nil
}

// restoreDeployInterface undoes switchDeployInterface (Ironic's
// restore_interface). The node is not saved.
func (c *Conductor) restoreDeployInterface(t *task) {
	n := t.node
	orig, _ := n.DriverInternalInfo[originalDeployInterfaceKey].(string)
	if orig == "" {
		return
	}
	delete(n.DriverInternalInfo, originalDeployInterfaceKey)
	n.DeployInterface = orig
	t.drv = nil
}

func (c *Conductor) ramdiskDeploy(t *task) bool {
	d, err := t.driver()
	if err != nil {
		return false
	}
	r, ok := d.Deploy().(RamdiskDeployer)
	return ok && r.RamdiskDeploy()
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
		src.InBand = inBandInterfaces(d)
		src.Agent = withRAIDCreateArgs(cache, src.InBand)
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
	p.Manual = kind == steps.Clean && n.TargetProvisionState == statemachine.Manageable
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
	case kind == steps.Clean && n.TargetProvisionState != statemachine.Manageable:
		pl, err = c.planner().AutomatedClean(steps.AutomatedCleanRequest{Source: src, NodeAutomatedClean: n.AutomatedClean})
	case kind == steps.Clean:
		pl, err = c.planner().ManualClean(steps.ManualRequest{Source: src, Steps: user, DisableRamdisk: disable})
	case kind == steps.Service:
		pl, err = c.planner().Service(steps.ManualRequest{Source: src, Steps: user, DisableRamdisk: disable})
	default:
		var tpls []steps.Template
		if tpls, err = c.templates(ctx, n); err == nil {
			pl, err = c.planner().Deploy(steps.DeployRequest{Source: src, UserSteps: user,
				Templates: tpls, InstanceTraits: instanceTraits(n), SkipMissing: c.agentBased(t)})
		}
	}
	if err != nil {
		return c.stepsFailed(ctx, t, kind, planFailedMessage(kind, n.UUID, describeErr(err)), false)
	}
	if pl.Skip {
		return c.finishSteps(ctx, t, kind)
	}
	prog := pl.Progress()
	prog.Manual = kind == steps.Clean && n.TargetProvisionState == statemachine.Manageable
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
	tpls, err := c.templates(ctx, n)
	if err != nil {
		return prog, err
	}
	pl, err := c.planner().Deploy(steps.DeployRequest{Source: src, UserSteps: prog.UserSteps,
		Templates: tpls, InstanceTraits: instanceTraits(n)})
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
	if url, _ := t.node.DriverInternalInfo[driver.InternalAgentURL].(string); url == "" {
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

// templates returns the deploy templates a deployment of n may use: the
// configured ones (Options.DeployTemplates) and those of the store whose
// name is one of n's instance_info traits, as Ironic looks them up by
// name; a configured template shadows a stored one of the same name.
func (c *Conductor) templates(ctx context.Context, n *baremetal.Node) ([]steps.Template, error) {
	out := make([]steps.Template, 0, len(c.opts.DeployTemplates))
	configured := map[string]bool{}
	for _, dt := range c.opts.DeployTemplates {
		tp := steps.Template{Name: dt.Name}
		for _, s := range dt.Steps {
			tp.Steps = append(tp.Steps, steps.Step{Interface: s.Interface, Name: s.Step, Args: s.Args, Priority: s.Priority})
		}
		out = append(out, tp)
		configured[dt.Name] = true
	}
	for _, trait := range instanceTraits(n) {
		if configured[trait] || !steps.ValidTraitName(trait) {
			continue
		}
		dt, err := c.store.DeployTemplates().Get(ctx, trait)
		if errors.Is(err, baremetal.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("node %s: reading deploy template %s: %w", n.UUID, trait, err)
		}
		configured[trait] = true
		tp := steps.Template{Name: dt.Name}
		for _, s := range dt.Steps {
			tp.Steps = append(tp.Steps, steps.Step{Interface: s.Interface, Name: s.Step, Args: s.Args, Priority: s.Priority})
		}
		out = append(out, tp)
	}
	return out, nil
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

func ensureMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func stepsToJSON(list []steps.Step) ([]any, error) {
	if len(list) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(list)
	if err != nil {
		return nil, fmt.Errorf("encoding steps as JSON: %w", err)
	}
	var out []any
	// Step arguments keep their numbers exactly (9007199254740993, 1.0).
	if err := jsonexact.Decode(b, &out); err != nil {
		return nil, fmt.Errorf("decoding steps from JSON: %w", err)
	}
	return out, nil
}

func stepsFromJSON(v any) ([]steps.Step, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out []steps.Step
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// validateUserSteps checks user clean or service steps against the node's
// driver steps (agent steps are validated again once the agent reports);
// a refusal is an *InvalidFieldError on clean_steps or service_steps that
// wraps the planner's error.
func (c *Conductor) validateUserSteps(ctx context.Context, t *task, kind steps.Kind, user []steps.Step, disableRamdisk bool) error {
	src, err := c.stepSource(ctx, t, kind)
	if err != nil {
		return err
	}
	req := steps.ManualRequest{Source: src, Steps: user, DisableRamdisk: disableRamdisk, SkipMissing: c.agentBased(t)}
	if kind == steps.Clean {
		_, err = c.planner().ManualClean(req)
	} else {
		_, err = c.planner().Service(req)
	}
	if err != nil {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: t.uuid(), Field: string(kind) + "_steps",
			Expected: "steps the node's interfaces provide, with the arguments they declare", Err: err}
	}
	return nil
}

// planFailedMessage is the last_error of a clean, deploy or service whose
// steps could not be planned, in Ironic's words (cleaning.py,
// deployments.py and servicing.py of Ironic master): "Cannot clean node
// <uuid>: <why>", "Cannot get deploy steps; failed to deploy: <why>" and
// "Cannot service node <uuid>: <why>".
func planFailedMessage(kind steps.Kind, uuid, why string) string {
	switch kind {
	case steps.Clean:
		return fmt.Sprintf("Cannot clean node %s: %s", uuid, why)
	case steps.Deploy:
		return "Cannot get deploy steps; failed to deploy: " + why
	}
	return fmt.Sprintf("Cannot service node %s: %s", uuid, why)
}
