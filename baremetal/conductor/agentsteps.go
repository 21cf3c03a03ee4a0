package conductor

import (
	"context"
	"errors"
	"fmt"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/steps"
)

// deployStepsFetchRetryable says whether a failure to fetch the agent's
// in-band deploy steps at a heartbeat in wait call-back leaves the node
// waiting for the next heartbeat (true) or fails the deploy (false, as
// Ironic does, reference §7.2 step 6). An agent that answers busy (409,
// Ironic's AgentInProgress) is retried, as every agent command in a wait
// state is (classify: AgentBusy). An agent that cannot be connected to
// right after its heartbeat is treated as transient too: this is the
// ramdisk's first heartbeat after the boot the deploy step asked for, and
// the conductor already waits for the next heartbeat when an agent is
// unreachable with a reboot pending (the planner's AgentConnectionLost
// rule); the deploy callback timeout bounds the wait. Any other error
// (the command failed, the agent API refused it, a response that does not
// parse, no agent client) fails the deploy.
func deployStepsFetchRetryable(err error) bool {
	return errors.Is(err, agentclient.ErrAgentBusy) || errors.Is(err, agentclient.ErrConnectionFailed)
}

// agentOf addresses the node's agent.
func agentOf(n *baremetal.Node) agentclient.Agent {
	url, _ := n.DriverInternalInfo[driver.InternalAgentURL].(string)
	tok, _ := n.DriverInternalInfo[driver.InternalAgentToken].(string)
	ca, _ := n.DriverInternalInfo[driver.InternalAgentVerifyCA].(string)
	return agentclient.Agent{NodeUUID: n.UUID, URL: url, Token: tok, VerifyCA: ca}
}

func (c *Conductor) agentClient() (*agentclient.Client, error) {
	if c.agent.Client == nil {
		return nil, errors.New("no agent client configured (AgentSettings.Client)")
	}
	return c.agent.Client, nil
}

// refreshAgentSteps asks the agent for its steps of kind and caches them.
func (c *Conductor) refreshAgentSteps(ctx context.Context, t *task, kind steps.Kind) error {
	cl, err := c.agentClient()
	if err != nil {
		return err
	}
	n := t.node
	a := agentOf(n)
	node, ports := agentNodeDict(n, kind), t.agentPorts(ctx)
	var res agentclient.StepsResult
	switch kind {
	case steps.Clean:
		res, err = cl.GetCleanSteps(ctx, a, node, ports)
	case steps.Deploy:
		res, err = cl.GetDeploySteps(ctx, a, node, ports)
	default:
		res, err = cl.GetServiceSteps(ctx, a, node, ports)
	}
	if err != nil {
		return err
	}
	cache := steps.AgentSteps(kind, res.Steps)
	if err := steps.WriteAgentCache(kind, ensureMap(n.DriverInternalInfo), cache, c.clock.Now().UTC().Format(agentclient.LastHeartbeatLayout)); err != nil {
		return err
	}
	v := make(map[string]any, len(res.HardwareManagerVersion))
	for k, s := range res.HardwareManagerVersion {
		v[k] = s
	}
	n.DriverInternalInfo[steps.HardwareManagerVersionKey] = v
	return nil
}

// executeAgentStep starts an in-band step on the agent; its completion is
// seen on a later heartbeat, or at once with AgentSettings.PollCommands.
func (c *Conductor) executeAgentStep(ctx context.Context, t *task, kind steps.Kind, s steps.Step) (driver.StepResult, error) {
	cl, err := c.agentClient()
	if err != nil {
		return driver.StepResult{}, err
	}
	n := t.node
	a := agentOf(n)
	if a.URL == "" {
		return driver.StepResult{}, fmt.Errorf("%w: node %s has no agent URL yet", agentclient.ErrConnectionFailed, n.UUID)
	}
	node, ports, ver := agentNodeDict(n, kind), t.agentPorts(ctx), hardwareManagerVersion(n)
	s, err = prepareAgentRAIDStep(n, kind, s, node)
	if err != nil {
		return driver.StepResult{}, err
	}
	var res *agentclient.CommandResult
	switch kind {
	case steps.Clean:
		res, err = cl.ExecuteCleanStep(ctx, a, s, node, ports, ver)
	case steps.Deploy:
		res, err = cl.ExecuteDeployStep(ctx, a, s, node, ports, ver)
	default:
		res, err = cl.ExecuteServiceStep(ctx, a, s, node, ports, ver)
	}
	if err != nil {
		return driver.StepResult{}, err
	}
	out := driver.StepResult{Wait: true}
	if res != nil {
		out.AgentCommand = res.ID
	}
	return out, nil
}

// processNextStep looks at the agent's last command and continues the run
// accordingly (Ironic's process_next_step).
func (c *Conductor) processNextStep(ctx context.Context, t *task, kind steps.Kind) error {
	n := t.node
	prog, err := readNodeProgress(n, kind)
	if err != nil {
		return c.stepsFailed(ctx, t, kind, describeErr(err), false)
	}
	if prog.Polling {
		return nil
	}
	prog, ok, err := c.revalidateOrFail(ctx, t, prog)
	if !ok {
		return err
	}
	cl, err := c.agentClient()
	if err != nil {
		return err
	}
	cmds, err := cl.ListCommands(ctx, agentOf(n))
	if err != nil {
		return err
	}
	execName := "execute_" + string(kind) + "_step"
	fresh := true
	for _, cmd := range cmds {
		if cmd.Name != "get_"+string(kind)+"_steps" {
			fresh = false
			break
		}
	}
	if fresh {
		return c.runActions(ctx, t, kind, c.planner().Decide(prog, steps.Outcome{Kind: steps.AgentRebooted}))
	}
	// The step's command is the last one but for step listings the
	// conductor itself may have asked for since (a refresh of the cache).
	li := len(cmds) - 1
	for li > 0 && cmds[li].Name == "get_"+string(kind)+"_steps" {
		li--
	}
	last := cmds[li]
	switch {
	case last.Status == agentclient.StatusRunning:
		return nil
	case retryPending(prog, last, kind):
		// The agent was busy when the current step was sent (it never
		// started): now that it is idle, send the same step again.
		return c.runActions(ctx, t, kind, c.planner().Continue(prog))
	case last.Name != execName:
		return nil
	case last.Status.IsVersionMismatch():
		return c.runActions(ctx, t, kind, c.planner().Decide(prog, steps.Outcome{Kind: steps.VersionMismatch}))
	case last.Status == agentclient.StatusFailed:
		msg := "unknown error"
		if last.Error != nil {
			msg = last.Error.String()
		}
		if prog.Current != nil {
			c.metrics.stepFailures.WithLabelValues(string(kind), prog.Current.Key()).Inc()
			c.stepEvent(t, EventStepEnd, kind, *prog.Current, msg)
		}
		return c.runActions(ctx, t, kind, c.planner().Decide(prog, steps.Outcome{Kind: steps.StepFailed, Node: n.UUID, Err: baremetal.MaskText(msg), FromAgent: true}))
	case last.Status == agentclient.StatusSucceeded:
		if sr, err := agentclient.DecodeStepResult(kind, &last); err == nil && prog.Current != nil &&
			(sr.Step.Interface != "" && (sr.Step.Interface != prog.Current.Interface || sr.Step.Name != prog.Current.Name)) {
			// A late report for a step that is already finished.
			return nil
		}
		if prog.Current == nil {
			return nil
		}
		if err := c.finishAgentRAIDStep(n, kind, *prog.Current, &last); err != nil {
			msg := describeErr(err)
			c.metrics.stepFailures.WithLabelValues(string(kind), prog.Current.Key()).Inc()
			c.stepEvent(t, EventStepEnd, kind, *prog.Current, msg)
			return c.runActions(ctx, t, kind, c.planner().Decide(prog, steps.Outcome{Kind: steps.StepFailed, Node: n.UUID, Err: baremetal.MaskText(msg)}))
		}
		c.stepEvent(t, EventStepEnd, kind, *prog.Current, "")
		if prog.Current.RebootRequested {
			return c.runActions(ctx, t, kind, c.planner().Decide(prog, steps.Outcome{Kind: steps.RebootRequested}))
		}
		return c.runActions(ctx, t, kind, c.planner().Decide(prog, steps.Outcome{Kind: steps.StepDone}))
	}
	return nil
}

// retryPending reports whether the current step waits to be sent again
// after the agent answered busy: the skip flag is false and the agent's
// last command is not the current step's.
func retryPending(prog steps.Progress, last agentclient.CommandResult, kind steps.Kind) bool {
	if prog.SkipCurrentStep == nil || *prog.SkipCurrentStep || prog.Current == nil || prog.Reboot {
		return false
	}
	if last.Name != "execute_"+string(kind)+"_step" {
		return true
	}
	sr, err := agentclient.DecodeStepResult(kind, &last)
	return err == nil && sr.Step.Interface != "" && (sr.Step.Interface != prog.Current.Interface || sr.Step.Name != prog.Current.Name)
}

// syncAgent flushes the disks of the node's running agent (standby.sync)
// before the node loses power out of band, as Ironic does before a hard
// power off under an agent. It does nothing when no agent (URL and token)
// is recorded or the node is not powered on. A failure is logged and
// recorded in the node's history, and does not stop the power action: a
// node must stay controllable when its agent hangs.
func (c *Conductor) syncAgent(ctx context.Context, t *task) {
	n := t.node
	a := agentOf(n)
	if a.URL == "" || a.Token == "" || c.agent.Client == nil || n.PowerState != driver.PowerOn {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, c.agent.SyncTimeout)
	defer cancel()
	if _, err := c.agent.Client.Sync(sctx, a); err != nil {
		c.log.Warn("agent did not flush the disks before the power off", "node", n.UUID, "error", err)
		c.history(ctx, n.UUID, "agent sync failed", "provisioning",
			fmt.Sprintf("Failed to flush the file system of node %s before powering it off: %s", n.UUID, describeErr(err)), baremetal.HistoryWarning)
	}
}

// agentCommandFailed waits (at most PowerOffWait) for the agent's
// asynchronous command to end and returns its error when it FAILED. An
// agent that goes away while powering off (the expected end) or does not
// answer in time is not a failure: the power state decides.
func (c *Conductor) agentCommandFailed(ctx context.Context, a agentclient.Agent, res *agentclient.CommandResult) error {
	if res == nil || res.ID == "" {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, c.agent.PowerOffWait)
	defer cancel()
	got, err := c.agent.Client.GetCommandStatus(wctx, a, res.ID, true)
	if err != nil || got == nil || got.Status != agentclient.StatusFailed {
		return nil
	}
	msg := "unknown error"
	if got.Error != nil {
		msg = got.Error.String()
	}
	return fmt.Errorf("%s: %s", got.Name, baremetal.MaskText(msg))
}
