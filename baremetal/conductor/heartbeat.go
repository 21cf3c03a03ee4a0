package conductor

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// AgentBackend returns the conductor's implementation of the agent lookup
// and heartbeat handler's Backend: mount
// agentclient.NewHandler(c.AgentBackend(), cfg) where agents can reach it.
func (c *Conductor) AgentBackend() agentclient.Backend { return agentBackend{c} }

type agentBackend struct{ c *Conductor }

var _ agentclient.Backend = agentBackend{}

func (b agentBackend) LookupNode(ctx context.Context, q agentclient.LookupQuery) (agentclient.Node, error) {
	n, err := b.c.store.LookupNode(ctx, q.NodeUUID, q.Addresses)
	if err != nil {
		if errors.Is(err, baremetal.ErrNotFound) || errors.Is(err, baremetal.ErrInvalidInput) {
			return agentclient.Node{}, fmt.Errorf("%w: %w", agentclient.ErrNodeNotFound, err)
		}
		return agentclient.Node{}, err
	}
	return b.c.agentNode(n), nil
}

func (b agentBackend) GetNode(ctx context.Context, ident string) (agentclient.Node, error) {
	n, err := b.c.store.GetNode(ctx, ident)
	if err != nil {
		if errors.Is(err, baremetal.ErrNotFound) {
			return agentclient.Node{}, fmt.Errorf("%w: %w", agentclient.ErrNodeNotFound, err)
		}
		return agentclient.Node{}, err
	}
	return b.c.agentNode(n), nil
}

func (b agentBackend) EnsureAgentToken(ctx context.Context, nodeUUID, candidate string) (bool, error) {
	c := b.c
	// Ironic's lookup takes the lock without retry (a locked node answers
	// 409 and the agent backs off). A node in inspect wait is locked only
	// for a moment by its own boot into the ramdisk, and the ramdisk
	// asking for its token is about to post its inspection data, which
	// Ironic's continue_inspection handles under a lock taken with the
	// usual retries: wait for it the same way.
	if created, ok := c.depositToken(nodeUUID, candidate); ok {
		// This conductor holds the node while powering it into the
		// ramdisk whose agent asks: answer now instead of 409.
		return created, nil
	}
	policy := baremetal.NoRetry()
	if cur, err := c.store.GetNode(ctx, nodeUUID); err == nil && cur.ProvisionState == string(statemachine.InspectWait) {
		policy = inspectionLockPolicy()
	}
	n, err := baremetal.AcquireNode(ctx, c.store, nodeUUID, c.host, policy)
	if err != nil {
		if errors.Is(err, baremetal.ErrNodeLocked) {
			return false, fmt.Errorf("%w: %w", agentclient.ErrNodeLocked, err)
		}
		if errors.Is(err, baremetal.ErrNotFound) {
			return false, fmt.Errorf("%w: %w", agentclient.ErrNodeNotFound, err)
		}
		return false, err
	}
	t := c.newTask(n)
	defer t.release()
	if tok, _ := n.DriverInternalInfo["agent_secret_token"].(string); tok != "" {
		return false, nil
	}
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo["agent_secret_token"] = candidate
	if err := t.save(ctx); err != nil {
		return false, err
	}
	return true, nil
}

func (b agentBackend) RecordHeartbeat(ctx context.Context, hb agentclient.Heartbeat) error {
	c := b.c
	if !c.running.Load() {
		return fmt.Errorf("baremetal: %w", ErrConductorNotRunning)
	}
	c.hbMu.Lock()
	c.pendingHB[hb.NodeUUID] = hb
	c.hbMu.Unlock()
	c.submit(job{uuid: hb.NodeUUID, kind: jobHeartbeat})
	return nil
}

func (c *Conductor) agentNode(n *baremetal.Node) agentclient.Node {
	tok, _ := n.DriverInternalInfo["agent_secret_token"].(string)
	if pending := c.pendingToken(n.UUID); pending != "" {
		// Issued by a lookup during a power action still in progress:
		// the stored token (if any) is the previous boot's.
		tok = pending
	}
	url, _ := n.DriverInternalInfo["agent_url"].(string)
	ca, _ := n.DriverInternalInfo["agent_verify_ca"].(string)
	return agentclient.Node{
		UUID: n.UUID, Name: n.Name, ProvisionState: n.ProvisionState, Reservation: n.Reservation,
		FastTrack: c.fastTrackable(&task{node: n}), ManagementInterface: n.ManagementInterface,
		Properties: baremetal.CloneMap(n.Properties), InstanceInfo: baremetal.CloneMap(n.InstanceInfo),
		DriverInternalInfo: baremetal.CloneMap(n.DriverInternalInfo),
		AgentToken:         tok, AgentURL: url, AgentVerifyCA: ca,
	}
}

// heartbeatAllowed is Ironic's HEARTBEAT_ALLOWED plus the fast-track
// states.
func heartbeatAllowed(s statemachine.State, fastTrack bool) bool {
	switch s {
	case statemachine.DeployWait, statemachine.CleanWait, statemachine.RescueWait, statemachine.Deploying,
		statemachine.Cleaning, statemachine.Rescuing, statemachine.DeployHold, statemachine.CleanHold,
		statemachine.Servicing, statemachine.ServiceWait, statemachine.ServiceHold:
		return true
	case statemachine.Manageable, statemachine.Available, statemachine.Enroll:
		return fastTrack
	}
	return false
}

// processHeartbeat records the latest heartbeat of a node and continues
// whatever waits for it (reference §7.2).
func (c *Conductor) processHeartbeat(ctx context.Context, uuid string) {
	c.hbMu.Lock()
	hb, ok := c.pendingHB[uuid]
	delete(c.pendingHB, uuid)
	c.hbMu.Unlock()
	if !ok {
		return
	}
	n, err := c.store.ReserveNode(ctx, uuid, c.host)
	if err != nil {
		// Locked: Ironic drops the heartbeat; the agent sends another.
		return
	}
	if !c.ownsNode(n) {
		// Another conductor owns the node; its heartbeats must be routed
		// there (NodeOwner). The agent sends another.
		c.releaseQuietly(uuid)
		return
	}
	t := c.newTask(n)
	defer t.release()
	state := statemachine.State(n.ProvisionState)
	if !heartbeatAllowed(state, c.fastTrackable(t)) {
		return
	}
	c.metrics.heartbeats.WithLabelValues(n.ProvisionState).Inc()
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo["agent_url"] = hb.CallbackURL
	n.DriverInternalInfo["agent_version"] = hb.AgentVersion
	n.DriverInternalInfo["agent_last_heartbeat"] = hb.ReceivedAt.UTC().Format(agentclient.LastHeartbeatLayout)
	if hb.AgentVerifyCA != "" {
		n.DriverInternalInfo["agent_verify_ca"] = hb.AgentVerifyCA
	}
	if hb.AgentStatus != "" {
		n.DriverInternalInfo["agent_status"] = hb.AgentStatus
		n.DriverInternalInfo["agent_status_message"] = hb.AgentStatusMessage
	}
	switch state {
	case statemachine.DeployWait, statemachine.CleanWait, statemachine.ServiceWait, statemachine.RescueWait:
	default:
		// Record-only states.
		if err := t.save(ctx); err != nil {
			c.log.Warn("heartbeat not recorded", "node", uuid, "error", err)
		}
		return
	}
	if n.Maintenance {
		if err := t.save(ctx); err != nil {
			c.log.Warn("heartbeat not recorded", "node", uuid, "error", err)
		}
		return
	}
	if err := t.save(ctx); err != nil {
		c.log.Warn("heartbeat not recorded", "node", uuid, "error", err)
		return
	}
	if err := c.store.TouchProvisioning(ctx, uuid); err == nil {
		if fresh, err := c.store.GetNode(ctx, uuid); err == nil && fresh.Version == n.Version {
			n.ProvisionUpdatedAt = fresh.ProvisionUpdatedAt
		}
	}
	var perr error
	switch state {
	case statemachine.CleanWait, statemachine.ServiceWait:
		kind := steps.Clean
		if state == statemachine.ServiceWait {
			kind = steps.Service
		}
		if len(*currentStepColumn(n, kind)) == 0 {
			// The ramdisk just booted: fetch its steps, plan, run.
			if perr = t.process(ctx, statemachine.EventResume, moveOpts{keepTarget: true}); perr != nil {
				break
			}
			if err := c.refreshAgentSteps(ctx, t, kind); err != nil {
				perr = c.stepsFailed(ctx, t, kind, fmt.Sprintf("Failed to get %s steps from the agent of node %s: %s", kind, uuid, describeErr(err)), false)
				break
			}
			perr = c.planAndRun(ctx, t, kind)
			break
		}
		perr = c.processNextStep(ctx, t, kind)
	case statemachine.DeployWait:
		if cache, _ := steps.ReadAgentCache(steps.Deploy, n.DriverInternalInfo); len(cache) == 0 {
			if err := c.refreshAgentSteps(ctx, t, steps.Deploy); err != nil {
				if deployStepsFetchRetryable(err) {
					c.log.Info("in-band deploy steps not fetched; retrying at the next heartbeat", "node", uuid, "error", err)
					break
				}
				perr = c.stepsFailed(ctx, t, steps.Deploy, fmt.Sprintf("Failed to get deploy steps from the agent of node %s: %s", uuid, describeErr(err)), false)
				break
			}
		}
		perr = c.processNextStep(ctx, t, steps.Deploy)
	case statemachine.RescueWait:
		perr = c.finalizeRescue(ctx, t)
	}
	if perr != nil {
		c.log.Debug("heartbeat processing ended with an error", "node", uuid, "error", perr)
	}
}

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
	url, _ := n.DriverInternalInfo["agent_url"].(string)
	tok, _ := n.DriverInternalInfo["agent_secret_token"].(string)
	ca, _ := n.DriverInternalInfo["agent_verify_ca"].(string)
	return agentclient.Agent{NodeUUID: n.UUID, URL: url, Token: tok, VerifyCA: ca}
}

func (c *Conductor) agentClient() (*agentclient.Client, error) {
	if c.agent.Client == nil {
		return nil, fmt.Errorf("baremetal: no agent client configured (AgentSettings.Client)")
	}
	return c.agent.Client, nil
}

// agentNodeDict is the node as sent to the agent: secrets masked, except
// the config drive for deploy steps, which the agent writes.
func agentNodeDict(n *baremetal.Node, kind steps.Kind) map[string]any {
	ii := baremetal.MaskSecrets(n.InstanceInfo)
	if kind == steps.Deploy {
		if cd, ok := n.InstanceInfo["configdrive"]; ok {
			ii = ensureMap(ii)
			ii["configdrive"] = cd
		}
	}
	return map[string]any{
		"uuid": n.UUID, "name": n.Name, "driver": n.Driver, "properties": baremetal.CloneMap(n.Properties),
		"instance_info": ii, "driver_internal_info": baremetal.MaskSecrets(n.DriverInternalInfo),
		"driver_info": baremetal.MaskSecrets(n.DriverInfo),
	}
}

func (t *task) agentPorts(ctx context.Context) []map[string]any {
	ps, err := t.loadPorts(ctx)
	if err != nil {
		return nil
	}
	out := make([]map[string]any, 0, len(ps))
	for _, p := range ps {
		out = append(out, map[string]any{"uuid": p.UUID, "address": p.Address, "pxe_enabled": p.PXEEnabled})
	}
	return out
}

func hardwareManagerVersion(n *baremetal.Node) map[string]string {
	raw, _ := n.DriverInternalInfo[steps.HardwareManagerVersionKey].(map[string]any)
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		out[k] = fmt.Sprint(v)
	}
	return out
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
// seen on a later heartbeat.
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
	switch kind {
	case steps.Clean:
		_, err = cl.ExecuteCleanStep(ctx, a, s, node, ports, ver)
	case steps.Deploy:
		_, err = cl.ExecuteDeployStep(ctx, a, s, node, ports, ver)
	default:
		_, err = cl.ExecuteServiceStep(ctx, a, s, node, ports, ver)
	}
	if err != nil {
		return driver.StepResult{}, err
	}
	return driver.StepResult{Wait: true}, nil
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
		c.stepEvent(t, EventStepEnd, kind, *prog.Current, "")
		if prog.Current.RebootRequested {
			return c.runActions(ctx, t, kind, c.planner().Decide(prog, steps.Outcome{Kind: steps.RebootRequested}))
		}
		return c.runActions(ctx, t, kind, c.planner().Decide(prog, steps.Outcome{Kind: steps.StepDone}))
	}
	return nil
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
	if a.URL == "" || a.Token == "" || c.agent.Client == nil || n.PowerState != string(driver.PowerOn) {
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

// powerOffAgent powers off a node whose agent runs, in Ironic's
// tear_down_agent order: the disks are flushed (standby.sync), the agent
// is asked to power the machine off (standby.power_off, unless
// ForceOOBPowerOff), the power state is polled for up to PowerOffWait,
// and only a node still on is powered off out of band. Without an agent
// it is a plain out-of-band power off.
func (c *Conductor) powerOffAgent(ctx context.Context, t *task) error {
	n := t.node
	a := agentOf(n)
	if a.URL == "" || c.agent.Client == nil || n.PowerState != string(driver.PowerOn) {
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
	url := n.DriverInternalInfo["agent_url"]
	delete(n.DriverInternalInfo, "agent_url")
	if err := c.powerAction(ctx, t, driver.PowerOff, 0); err != nil {
		n.DriverInternalInfo["agent_url"] = url
		return err
	}
	return nil
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

// waitPoweredOff polls the node's power state until it reads power off or
// PowerOffWait has passed (or ctx ends).
func (c *Conductor) waitPoweredOff(ctx context.Context, t *task) bool {
	deadline := c.clock.Now().Add(c.agent.PowerOffWait)
	for {
		var ps driver.PowerState
		err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			p := d.Power()
			if p == nil {
				return fmt.Errorf("no power interface")
			}
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

// tokenDesk issues the agent token of a node while the conductor holding
// the node's lock powers it into a ramdisk. Ironic's lookup takes the
// node's exclusive lock without retry, so an agent that boots quickly
// (before the power action returns) met a locked node, got 409 and slept
// 5 s. The holder opens a desk before the power action: a lookup then
// deposits its candidate token here (the first one wins, later lookups
// get the masked value, as for a stored token), the holder writes it into
// the node and saves it once the power action returns, and only then
// closes the desk. The desk exists only in the process holding the lock,
// so the one-time disclosure and the holder's fenced write are kept.
type tokenDesk struct {
	mu     sync.Mutex
	token  string
	closed bool
}

// depositToken offers candidate to the node's open desk. ok is false when
// no desk is open; created is true when candidate became the token.
func (c *Conductor) depositToken(uuid, candidate string) (created, ok bool) {
	v, found := c.bootTokens.Load(uuid)
	if !found {
		return false, false
	}
	d := v.(*tokenDesk)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false, false
	}
	if d.token != "" {
		return false, true
	}
	d.token = candidate
	return true, true
}

// pendingToken is the token deposited on the node's open desk, or "".
func (c *Conductor) pendingToken(uuid string) string {
	v, found := c.bootTokens.Load(uuid)
	if !found {
		return ""
	}
	d := v.(*tokenDesk)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ""
	}
	return d.token
}

// powerBootingAgent runs a power action (power on or reboot) that boots
// the node into a ramdisk whose agent will look the node up. When the
// node will have no token after the action (it was wiped for this boot,
// or the reboot wipes it; a pre-generated token stays), a lookup during
// the action is answered at once through a token desk, and the token it
// was given is saved with the node before the desk closes.
func (c *Conductor) powerBootingAgent(ctx context.Context, t *task, target driver.PowerState) error {
	n := t.node
	_, pre := n.DriverInternalInfo["agent_secret_token_pregenerated"]
	tok, _ := n.DriverInternalInfo["agent_secret_token"].(string)
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
	n.DriverInternalInfo["agent_secret_token"] = tok
	if serr := t.save(ctx); serr != nil {
		return errors.Join(err, serr)
	}
	return err
}
