package conductor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// RerunSafeStepper is an optional capability of a driver interface
// implementation that has steps: it says which of its steps may run again
// after a conductor died while running them (the step converges to the
// same result however often it runs, such as setting a BIOS value or
// writing the same image). A new owner resumes a deploy, clean or service
// at such a step instead of failing the node. Steps it does not name are
// assumed unsafe.
type RerunSafeStepper interface {
	StepRerunSafe(kind steps.Kind, step string) bool
}

// AgentHandoffStepper is an optional capability of an implementation
// with steps: it names the steps whose only work is to hand a command to
// the ramdisk agent (the direct interface's write_image sends
// deploy.execute_deploy_step and does nothing else). Such a step,
// interrupted by a conductor's death, is decided by asking the agent: the
// new owner waits for the agent when it knows the step, and runs the step
// again when a reachable agent never received it (nothing was done yet).
type AgentHandoffStepper interface {
	StepHandsOffToAgent(kind steps.Kind, step string) bool
}

// EventTakeover is published when a conductor resumes a node it took over
// from a dead conductor.
const EventTakeover EventType = "takeover"

// takeOverInterrupted handles the owned, unreserved nodes left in an
// active state with no pending intent: a dead (or restarted) conductor
// was running them. Each is taken over by a job of the worker pool
// (jobTakeover), so that takeovers run with the pool's concurrency and,
// like any of the conductor's own work, wait out a database outage:
// a pass that resumed every node itself, eight at a time, took tens of
// seconds after a SIGKILL in a fleet of 500 nodes, and the nodes it had
// not reached waited unowned while their owner changed again. With wait
// set the pass returns once every job it handed over has ended (or ctx
// ended, or the conductor stops); the periodic check does not wait.
// Then the consoles the dead conductor ran start on their nodes' owners
// (syncConsoles).
func (c *Conductor) takeOverInterrupted(ctx context.Context, wait bool) {
	nodes, err := c.listAll(ctx, baremetal.NodeFilter{Reserved: new(false)})
	if err != nil {
		c.log.Warn("orphan check: cannot list nodes", "error", err)
		return
	}
	var pending sync.WaitGroup
	for _, n := range nodes {
		if !interrupted(n) || !c.ownsNode(n) {
			continue
		}
		j := job{uuid: n.UUID, kind: jobTakeover}
		if wait {
			pending.Add(1)
			j.done = pending.Done
		}
		if !c.submit(j) && wait {
			pending.Done()
		}
	}
	if wait {
		ended := make(chan struct{})
		go func() {
			pending.Wait()
			close(ended)
		}()
		select {
		case <-ended:
		case <-ctx.Done():
		case <-c.stopCh:
		}
	}
	c.syncConsoles(ctx)
}

// interrupted says n was left mid-operation: unreserved, no intent waiting
// for a worker, and in an active state or with a power action pending.
func interrupted(n *baremetal.Node) bool {
	if n.Reserved() {
		return false
	}
	if _, ok := readIntent(n); ok {
		return false
	}
	return statemachine.IsStuckTreatedAsFail(n.ProvisionState) || n.TargetPowerState != ""
}

// takeOverNode takes over one interrupted node. The lock is retried as
// the conductor's lock policy says: a heartbeat or a verb holding the node
// for a moment must not make the takeover skip it until the next check.
func (c *Conductor) takeOverNode(ctx context.Context, uuid string) {
	locked, err := baremetal.AcquireNode(ctx, c.locks(), uuid, c.host, *c.opts.LockPolicy)
	if err != nil {
		return
	}
	t := c.newTask(locked)
	defer t.release()
	if !interrupted(&baremetal.Node{ProvisionState: locked.ProvisionState, TargetPowerState: locked.TargetPowerState, DriverInternalInfo: locked.DriverInternalInfo}) || !c.ownsNode(locked) {
		return
	}
	c.recoverInterrupted(ctx, t, fmt.Sprintf("conductor %s took the node over from a dead conductor", c.host))
}

// recoverInterrupted takes over a node held under t that a conductor left
// mid-operation; why says what happened, for last_error and the history.
// It reports whether the node's operation was resumed.
func (c *Conductor) recoverInterrupted(ctx context.Context, t *task, why string) bool {
	cl := c.cluster
	n := t.node
	if n.TargetPowerState != "" {
		msg := fmt.Sprintf("Pending power operation to %s was aborted: %s", n.TargetPowerState, why)
		n.TargetPowerState = ""
		n.LastError = msg
		if err := t.save(ctx); err != nil {
			c.log.Warn("takeover: cannot clear the pending power action", "node", n.UUID, "error", err)
			return false
		}
		c.history(ctx, n.UUID, "power action aborted", "power", msg, baremetal.HistoryWarning)
		c.countTakeover(cl, "power_cleared")
	}
	state := n.ProvisionState
	if !statemachine.IsStuckTreatedAsFail(state) {
		return false
	}
	kind, hasSteps := stepKindOf(state)
	if hasSteps {
		if cl != nil && !cl.opts.FailInterrupted {
			resumed, reason := c.resume(ctx, t, kind, why)
			if resumed {
				return true
			}
			why += "; " + reason
		}
		msg := fmt.Sprintf("%s was interrupted and cannot be resumed: %s", state, why)
		_ = c.stepsFailed(ctx, t, kind, msg, kind == steps.Clean)
		c.countTakeover(cl, "failed")
		return false
	}
	t.fail(ctx, fmt.Sprintf("%s was interrupted and cannot be resumed: %s", state, why), true)
	c.countTakeover(cl, "failed")
	return false
}

func (c *Conductor) countTakeover(cl *cluster, outcome string) {
	if cl != nil {
		cl.takeovers.WithLabelValues(outcome).Inc()
	}
}

// resume continues an interrupted deploy, clean or service run from its
// persisted step index, when the rule of resumable allows it. It returns
// false with the reason otherwise, having changed nothing.
func (c *Conductor) resume(ctx context.Context, t *task, kind steps.Kind, why string) (bool, string) {
	n := t.node
	if done, _ := n.DriverInternalInfo[stepsFinishedKey(kind)].(bool); done {
		// Every step had finished; the conductor died tearing the run
		// down (which is idempotent): finish it here.
		c.history(ctx, n.UUID, "takeover", string(kind),
			fmt.Sprintf("%s; every step had finished, finishing %s", why, kindVerb(kind)), baremetal.HistoryWarning)
		c.countTakeover(c.cluster, "finished")
		if err := c.finishSteps(ctx, t, kind); err != nil {
			c.log.Warn("resumed teardown ended with an error", "node", n.UUID, "error", err)
		}
		return true, ""
	}
	prog, err := readNodeProgress(n, kind)
	if err != nil {
		return false, "its step progress cannot be read: " + describeErr(err)
	}
	if prog.Current == nil || prog.Current.IsZero() || prog.Index == nil {
		return c.restart(ctx, t, kind, why)
	}
	s := *prog.Current
	decision, reason := c.resumable(ctx, t, kind, s)
	switch decision {
	case resumeNo:
		return false, reason
	case resumeWait:
		// The agent still runs (or already finished) the step: wait for
		// its next heartbeat, which the new owner processes.
		if err := t.process(ctx, statemachine.EventWait, moveOpts{keepTarget: true}); err != nil {
			return false, "cannot move to the wait state: " + describeErr(err)
		}
		c.history(ctx, n.UUID, "takeover", string(kind),
			fmt.Sprintf("%s; step %s (index %d) is %s, waiting for the agent", why, s.Key(), *prog.Index, reason), baremetal.HistoryWarning)
		c.countTakeover(c.cluster, "waiting")
		return true, ""
	}
	f := false
	prog.SkipCurrentStep = &f
	c.history(ctx, n.UUID, "takeover", string(kind),
		fmt.Sprintf("%s; resuming %s at step %s (index %d), which %s", why, kindVerb(kind), s.Key(), *prog.Index, reason), baremetal.HistoryWarning)
	c.countTakeover(c.cluster, "resumed")
	c.publish(Event{Type: EventTakeover, NodeUUID: n.UUID, NodeName: n.Name, To: n.ProvisionState, StepKind: string(kind), Step: s.Key()})
	if err := c.runActions(ctx, t, kind, c.planner().Continue(prog)); err != nil {
		c.log.Warn("resumed operation ended with an error", "node", n.UUID, "error", err)
	}
	return true, ""
}

// restart starts a deploy or an automated clean that was interrupted
// before its first step again from the beginning, by writing its intent
// back on the node and queueing it; it returns false with the reason for
// manual cleaning and servicing. Why: everything before the first step is
// idempotent, but the requested manual steps were consumed with the intent
// (docs/takeover.md).
func (c *Conductor) restart(ctx context.Context, t *task, kind steps.Kind, why string) (bool, string) {
	n := t.node
	var in intent
	switch {
	case kind == steps.Deploy:
		in = intent{Op: opDeploy, RequestedAt: c.clock.Now()}
		if user, ok := n.DriverInternalInfo[userStepsKey(steps.Deploy)]; ok && user != nil {
			in.Args = map[string]any{"deploy_steps": user}
		}
	case kind == steps.Clean && n.TargetProvisionState != statemachine.Manageable:
		in = intent{Op: opClean, RequestedAt: c.clock.Now()}
	default:
		return false, "no step was recorded as running and the requested steps are gone"
	}
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[intentKey] = in.encode()
	if err := t.save(ctx); err != nil {
		return false, "cannot record the restart: " + describeErr(err)
	}
	c.history(ctx, n.UUID, "takeover", string(kind),
		fmt.Sprintf("%s; no step had started, restarting %s from the beginning", why, kindVerb(kind)), baremetal.HistoryWarning)
	c.countTakeover(c.cluster, "restarted")
	c.queue.push(job{uuid: n.UUID})
	return true, ""
}

type resumeDecision int

const (
	resumeNo resumeDecision = iota
	resumeRerun
	resumeWait
)

// agentAnswer is what the node's agent says about step s when asked for
// its commands during a takeover.
type agentAnswer int

const (
	// agentNotAsked: the rule did not need the agent, or could not ask it
	// for a declared step.
	agentNotAsked agentAnswer = iota
	// agentThisStep: the agent's last execute command is s.
	agentThisStep
	// agentOtherStep: the agent's last execute command is another step.
	agentOtherStep
	// agentNoStep: the agent never received s.
	agentNoStep
	// agentUnreachable: the agent's URL answers 404 or nothing.
	agentUnreachable
	// agentFailed: the agent cannot be asked for another reason.
	agentFailed
)

// resumeFacts are the facts resumable gathers about an interrupted step
// for resumeRule. Facts the rule does not reach are left zero.
type resumeFacts struct {
	reserved   bool   // a step the conductor runs itself
	driverErr  string // why the node's driver cannot be loaded, if so
	declared   bool   // declared by the node's implementation of its interface
	safeByImpl bool   // RerunSafeStepper says it is safe to re-run
	safeByOpts bool   // ClusterOptions.RerunSafeSteps lists it
	handsOff   bool   // AgentHandoffStepper says it only hands work to the agent
	agentBased bool   // the node runs an agent
	agent      agentAnswer
	detail     string // the command status, or the agent error
	step       string // the step's key, for the reasons
}

// resumeRule is resumable's decision table: it returns whether the step
// is re-run, waited for or failed, with the reason for the node's history.
// Why a pure function: each case of docs/takeover.md is one row of
// resume_rule_internal_test.go.
func resumeRule(f resumeFacts) (resumeDecision, string) {
	switch {
	case f.reserved:
		return resumeRerun, "the conductor runs itself and is idempotent"
	case f.driverErr != "":
		return resumeNo, "its driver cannot be loaded: " + f.driverErr
	case f.declared && f.safeByImpl:
		return resumeRerun, "its implementation declares safe to re-run"
	case f.declared && f.safeByOpts:
		return resumeRerun, "the conductor's options declare safe to re-run"
	case f.declared && f.agentBased && f.agent == agentThisStep:
		return resumeWait, "handed to the agent, which knows it (" + f.detail + ")"
	case f.declared && f.agentBased && f.handsOff && f.agent == agentNoStep:
		return resumeRerun, "it only hands work to the agent, which never received it"
	case f.declared:
		return resumeNo, fmt.Sprintf("step %s is not declared safe to re-run", f.step)
	case !f.agentBased:
		return resumeNo, fmt.Sprintf("step %s is provided by no interface of the node", f.step)
	case f.agent == agentThisStep:
		return resumeWait, "known to the agent (" + f.detail + ")"
	case f.agent == agentOtherStep, f.agent == agentNoStep:
		return resumeRerun, "the agent never received"
	case f.agent == agentUnreachable:
		// As Ironic does for a node in a wait state: wait for the next
		// heartbeat of the (new) agent, up to the callback timeout.
		return resumeWait, "unknown: the agent is not reachable (" + f.detail + ")"
	default:
		return resumeNo, f.detail
	}
}

// resumable decides whether a run interrupted at step s is re-run, waits
// for the agent's next heartbeat, or fails, with the reason for the node's
// history: it gathers the facts, asking the agent only when the rule needs
// it, and applies resumeRule. Why: a step is never run twice unless that
// is known to be safe. The cases, and the Ironic behaviour each follows,
// are in docs/takeover.md.
func (c *Conductor) resumable(ctx context.Context, t *task, kind steps.Kind, s steps.Step) (resumeDecision, string) {
	f := resumeFacts{reserved: s.IsReserved(), step: s.Key()}
	if f.reserved {
		return resumeRule(f)
	}
	d, err := t.driver()
	if err != nil {
		f.driverErr = describeErr(err)
		return resumeRule(f)
	}
	f.agentBased = c.agentBased(t)
	impl := d.Interface(driver.Kind(s.Interface))
	if impl != nil && driver.HasStep(impl, kind, s.Name) {
		f.declared = true
		if rs, ok := impl.(RerunSafeStepper); ok {
			f.safeByImpl = rs.StepRerunSafe(kind, s.Name)
		}
		f.safeByOpts = c.cluster != nil && c.cluster.rerun[s.Key()]
		if f.safeByImpl || f.safeByOpts || !f.agentBased {
			return resumeRule(f)
		}
		if status, ok := c.agentRunsStep(ctx, t, kind, s); ok {
			f.agent, f.detail = agentThisStep, string(status)
			return resumeRule(f)
		}
		if ho, ok := impl.(AgentHandoffStepper); ok {
			f.handsOff = ho.StepHandsOffToAgent(kind, s.Name)
		}
		if f.handsOff && c.agentNeverReceived(ctx, t, kind, s) {
			f.agent = agentNoStep
		}
		return resumeRule(f)
	}
	if !f.agentBased {
		return resumeRule(f)
	}
	f.agent, f.detail = c.inBandAnswer(ctx, t, kind, s)
	return resumeRule(f)
}

// inBandAnswer asks the node's agent what its last execute_<kind>_step
// command says about the in-band step s, with the command's status or the
// error that kept the agent from answering.
func (c *Conductor) inBandAnswer(ctx context.Context, t *task, kind steps.Kind, s steps.Step) (agentAnswer, string) {
	cl, err := c.agentClient()
	if err != nil {
		return agentFailed, "no agent client: " + describeErr(err)
	}
	a := agentOf(t.node)
	if a.URL == "" {
		return agentFailed, "the node's agent URL is unknown"
	}
	cmds, err := cl.ListCommands(ctx, a)
	if err != nil {
		if agentGone(err) {
			return agentUnreachable, describeErr(err)
		}
		return agentFailed, "the agent cannot be asked for its commands: " + describeErr(err)
	}
	execName := "execute_" + string(kind) + "_step"
	for i := len(cmds) - 1; i >= 0; i-- {
		if cmds[i].Name != execName {
			continue
		}
		if sr, err := agentclient.DecodeStepResult(kind, &cmds[i]); err == nil && sr.Step.Interface != "" &&
			(sr.Step.Interface != s.Interface || sr.Step.Name != s.Name) {
			return agentOtherStep, "" // the last step the agent received is an earlier one
		}
		return agentThisStep, string(cmds[i].Status)
	}
	return agentNoStep, ""
}

// agentRunsStep reports whether the last execute_<kind>_step command the
// node's agent received is step s, with that command's status: its result
// names s, or it still runs without a result (IPA names the step only in
// the result, and a run moves past an in-band step only once the agent
// reported it finished, so a step still running is the current one). An
// agent that cannot be asked, whose last step is another, or whose
// finished last step is not named, gives false.
func (c *Conductor) agentRunsStep(ctx context.Context, t *task, kind steps.Kind, s steps.Step) (agentclient.CommandStatus, bool) {
	cl, err := c.agentClient()
	if err != nil {
		return "", false
	}
	a := agentOf(t.node)
	if a.URL == "" {
		return "", false
	}
	cmds, err := cl.ListCommands(ctx, a)
	if err != nil {
		return "", false
	}
	execName := "execute_" + string(kind) + "_step"
	for i := len(cmds) - 1; i >= 0; i-- {
		if cmds[i].Name != execName {
			continue
		}
		sr, err := agentclient.DecodeStepResult(kind, &cmds[i])
		switch {
		case err != nil:
			return "", false
		case sr.Step.Interface == "" && sr.Step.Name == "":
			return cmds[i].Status, cmds[i].Status == agentclient.StatusRunning
		case sr.Step.Interface != s.Interface || sr.Step.Name != s.Name:
			return "", false
		}
		return cmds[i].Status, true
	}
	return "", false
}

// syncLocalState is Ironic's _sync_local_state, run once (reference
// §4.6): active nodes this conductor owns whose conductor affinity names
// another conductor (or none) are re-prepared here (deploy Prepare and
// TakeOver, which re-create conductor-local boot configuration) and their
// affinity set to this conductor, and their enabled consoles started
// here. At most PeriodicMaxWorkers nodes are handled per run. Then the
// consoles of every state move to their owners (syncConsoles). It is a
// periodic task (tests call it through export_test.go).
func (c *Conductor) syncLocalState(ctx context.Context) {
	cl := c.cluster
	if cl == nil || c.record == nil {
		return
	}
	nodes, err := c.listAll(ctx, baremetal.NodeFilter{ProvisionStates: []statemachine.State{statemachine.Active}, Reserved: new(false),
		Maintenance: new(false), ConductorAffinityNot: c.record.ID})
	if err != nil {
		c.log.Warn("sync local state: cannot list nodes", "error", err)
		return
	}
	done := 0
	for _, n := range nodes {
		if done >= c.opts.PeriodicMaxWorkers {
			break
		}
		locked, err := c.reserve(ctx, n.UUID)
		if err != nil {
			continue
		}
		done++
		c.reprepare(ctx, c.newTask(locked))
	}
	c.syncConsoles(ctx)
}

func (c *Conductor) reprepare(ctx context.Context, t *task) {
	defer t.release()
	n := t.node
	if n.ProvisionState != statemachine.Active || n.Maintenance || n.ConductorAffinity == c.record.ID || !c.ownsNode(n) {
		return
	}
	previous := n.ConductorAffinity
	err := callIface(ctx, t, driver.KindDeploy, "take over", func(d *driver.Driver, dep driver.DeployInterface, v *driver.Task) error {
		if err := dep.Prepare(ctx, v); err != nil {
			return err
		}
		return dep.TakeOver(ctx, v)
	})
	if err != nil {
		c.log.Warn("sync local state: takeover failed", "node", n.UUID, "error", err)
		c.history(ctx, n.UUID, "takeover failed", "conductor", fmt.Sprintf("conductor %s could not take the active node over: %s", c.host, describeErr(err)), baremetal.HistoryError)
		return
	}
	n.ConductorAffinity = c.record.ID
	if err := t.save(ctx); err != nil {
		c.log.Warn("sync local state: cannot record the affinity", "node", n.UUID, "error", err)
		return
	}
	c.countTakeover(c.cluster, "reprepared")
	c.history(ctx, n.UUID, "takeover", "conductor",
		fmt.Sprintf("conductor %s (id %d) re-prepared the active node, previously prepared by conductor id %d", c.host, c.record.ID, previous), baremetal.HistoryInfo)
	c.takeOverConsole(ctx, t)
}

// agentGone reports whether err from an agent call means no agent answers
// at the recorded URL (HTTP 404 or a failed connection), as opposed to an
// agent that answered with an error.
func agentGone(err error) bool {
	if errors.Is(err, agentclient.ErrConnectionFailed) {
		return true
	}
	var ae *agentclient.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// agentNeverReceived reports whether the node's agent answers and none of
// its execute_<kind>_step commands is s: the step was never handed over.
// An agent that cannot be asked, or a command whose step cannot be read,
// counts as "may have received it".
func (c *Conductor) agentNeverReceived(ctx context.Context, t *task, kind steps.Kind, s steps.Step) bool {
	cl, err := c.agentClient()
	if err != nil {
		return false
	}
	a := agentOf(t.node)
	if a.URL == "" {
		return false
	}
	cmds, err := cl.ListCommands(ctx, a)
	if err != nil {
		return false
	}
	execName := "execute_" + string(kind) + "_step"
	for i := range cmds {
		if cmds[i].Name != execName {
			continue
		}
		sr, err := agentclient.DecodeStepResult(kind, &cmds[i])
		if err != nil || sr.Step.Interface == "" && sr.Step.Name == "" ||
			sr.Step.Interface == s.Interface && sr.Step.Name == s.Name {
			return false
		}
	}
	return true
}
