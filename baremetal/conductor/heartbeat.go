package conductor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/jsonmap"
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
	b.c.recordLookup(n, q.Addresses)
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
	if cur, err := c.store.GetNode(ctx, nodeUUID); err == nil && cur.ProvisionState == statemachine.InspectWait {
		policy = inspectionLockPolicy()
	}
	n, err := baremetal.AcquireNode(ctx, c.locks(), nodeUUID, c.host, policy)
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
	if tok, _ := n.DriverInternalInfo[driver.InternalAgentToken].(string); tok != "" {
		t.release()
		return false, nil
	}
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[driver.InternalAgentToken] = candidate
	if rs, ok := c.store.(baremetal.ReleasingNodeStore); ok {
		// The token is written and the node released in one statement,
		// so the answer disclosing the token follows its commit at once:
		// a token is disclosed once, and a conductor that dies between
		// the commit and the answer locks the agent out for good (as in
		// Ironic), so that window is kept as short as it can be.
		if err := rs.UpdateNodeReleasing(ctx, n, c.host, nil); err != nil {
			t.release()
			return false, err
		}
		c.resv.released(n.UUID)
		return true, nil
	}
	defer t.release()
	if err := t.save(ctx); err != nil {
		return false, err
	}
	return true, nil
}

func (b agentBackend) RecordHeartbeat(ctx context.Context, hb agentclient.Heartbeat) error {
	c := b.c
	if !c.running.Load() {
		return ErrConductorNotRunning
	}
	c.hbMu.Lock()
	c.pendingHB[hb.NodeUUID] = hb
	c.hbMu.Unlock()
	c.submit(job{uuid: hb.NodeUUID, kind: jobHeartbeat})
	return nil
}

func (c *Conductor) agentNode(n *baremetal.Node) agentclient.Node {
	tok, _ := n.DriverInternalInfo[driver.InternalAgentToken].(string)
	if pending := c.pendingToken(n.UUID); pending != "" {
		// Issued by a lookup during a power action still in progress:
		// the stored token (if any) is the previous boot's.
		tok = pending
	}
	url, _ := n.DriverInternalInfo[driver.InternalAgentURL].(string)
	ca, _ := n.DriverInternalInfo[driver.InternalAgentVerifyCA].(string)
	return agentclient.Node{
		UUID: n.UUID, Name: n.Name, ProvisionState: n.ProvisionState, Reservation: n.Reservation,
		FastTrack: c.fastTrackable(&task{node: n}), ManagementInterface: n.ManagementInterface,
		Properties: jsonmap.Clone(n.Properties), InstanceInfo: jsonmap.Clone(n.InstanceInfo),
		DriverInternalInfo: jsonmap.Clone(n.DriverInternalInfo),
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

// heartbeatPending reports whether a heartbeat of node uuid's agent,
// received after since, waits in this conductor for a worker to process
// it, in a state whose wait a heartbeat continues.
func (c *Conductor) heartbeatPending(uuid string, state statemachine.State, since time.Time) bool {
	switch state {
	case statemachine.DeployWait, statemachine.CleanWait, statemachine.ServiceWait, statemachine.RescueWait:
	default:
		return false
	}
	c.hbMu.Lock()
	hb, ok := c.pendingHB[uuid]
	c.hbMu.Unlock()
	return ok && hb.ReceivedAt.After(since)
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
	n, err := c.reserve(ctx, uuid)
	if err != nil {
		// Locked: Ironic drops the heartbeat; the agent sends another.
		return
	}
	// Another conductor owning the node gets its heartbeats routed there
	// (NodeOwner); the agent sends another.
	t := c.ownedTask(n)
	if t == nil {
		return
	}
	defer t.release()
	// The first heartbeat of a boot attempt is marked in the node and
	// recorded as a boot stage once the node is saved: the mark rides on
	// the save the heartbeat makes anyway, so later heartbeats cost no
	// extra write or query.
	first := markFirstHeartbeat(n)
	save := func() bool {
		if err := t.save(ctx); err != nil {
			c.log.Warn("heartbeat not recorded", "node", uuid, "error", err)
			return false
		}
		if first {
			c.recordFirstHeartbeat(ctx, n, hb.CallbackURL)
		}
		return true
	}
	state := n.ProvisionState
	if !heartbeatAllowed(state, c.fastTrackable(t)) {
		if first {
			// Nothing else is saved for this heartbeat: save the mark.
			save()
		}
		return
	}
	c.metrics.heartbeats.WithLabelValues(string(n.ProvisionState)).Inc()
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[driver.InternalAgentURL] = hb.CallbackURL
	n.DriverInternalInfo[driver.InternalAgentVersion] = hb.AgentVersion
	n.DriverInternalInfo[driver.InternalAgentLastHeartbeat] = hb.ReceivedAt.UTC().Format(agentclient.LastHeartbeatLayout)
	if hb.AgentVerifyCA != "" {
		n.DriverInternalInfo[driver.InternalAgentVerifyCA] = hb.AgentVerifyCA
	}
	if hb.AgentStatus != "" {
		n.DriverInternalInfo[driver.InternalAgentStatus] = hb.AgentStatus
		n.DriverInternalInfo[driver.InternalAgentStatusMessage] = hb.AgentStatusMessage
	}
	switch state {
	case statemachine.DeployWait, statemachine.CleanWait, statemachine.ServiceWait, statemachine.RescueWait:
	default:
		// Record-only states.
		save()
		return
	}
	if n.Maintenance {
		save()
		return
	}
	// A heartbeat the node waits for is a line of its history, written
	// with the save it makes anyway (one commit on a RecordingNodeStore),
	// so a timeline shows when the agent called; the first one of a boot
	// is recorded as its boot stage instead, and an agent calling more
	// often than heartbeatHistoryInterval is sampled.
	if now := c.clock.Now(); !first && heartbeatDue(n, now) {
		n.DriverInternalInfo[heartbeatRecordedKey] = now.UTC().Format(time.RFC3339Nano)
		if err := t.saveRecording(ctx, c.heartbeatHistory(n, hb)); err != nil {
			c.log.Warn("heartbeat not recorded", "node", uuid, "error", err)
			return
		}
	} else if !save() {
		return
	}
	ctx, span := c.startNodeSpan(ctx, n, "heartbeat", attribute.String("anvil.agent.status", hb.AgentStatus))
	defer span.End()
	if err := c.store.TouchProvisioning(ctx, uuid); err == nil {
		if fresh, err := c.store.GetNode(ctx, uuid); err == nil && fresh.Version == n.Version {
			n.ProvisionUpdatedAt = fresh.ProvisionUpdatedAt
		}
	}
	if perr := c.continueWait(ctx, t, state); perr != nil {
		c.log.Debug("heartbeat processing ended with an error", "node", uuid, "error", perr)
	}
}

// EventTypeAgent is the history event type of the heartbeats a node in a
// wait state receives from its agent.
const EventTypeAgent = "agent"

// heartbeatHistoryInterval is the least time between two heartbeat lines
// of a node's history: IPA heartbeats every 30 to 60 % of its heartbeat
// timeout (tens of seconds), so each of its heartbeats is a line; a
// faster agent (a simulated one) is sampled.
const heartbeatHistoryInterval = 10 * time.Second

// heartbeatRecordedKey is the driver_internal_info key holding when the
// node's last heartbeat line was written.
const heartbeatRecordedKey = "anvil_heartbeat_recorded"

// heartbeatDue reports whether a heartbeat of n at now is to be a line of
// its history.
func heartbeatDue(n *baremetal.Node, now time.Time) bool {
	s, ok := n.DriverInternalInfo[heartbeatRecordedKey].(string)
	if !ok {
		return true
	}
	last, err := time.Parse(time.RFC3339Nano, s)
	return err != nil || now.Sub(last) >= heartbeatHistoryInterval || now.Before(last)
}

// heartbeatHistory is the history entry of a heartbeat of n's agent in a
// wait state.
func (c *Conductor) heartbeatHistory(n *baremetal.Node, hb agentclient.Heartbeat) *baremetal.HistoryEntry {
	msg := "heartbeat from the agent"
	if hb.AgentVersion != "" {
		msg += " (version " + hb.AgentVersion + ")"
	}
	if hb.AgentStatus != "" {
		msg += ", status " + hb.AgentStatus
	}
	return &baremetal.HistoryEntry{NodeUUID: n.UUID, Event: "agent heartbeat", EventType: EventTypeAgent, Message: msg,
		Severity: baremetal.HistoryInfo, Conductor: c.host}
}

// continueWait continues a node waiting for its agent (deploy, clean,
// service or rescue wait), as a heartbeat does: it is called by
// processHeartbeat and when the agent's command finished (watchCommand).
// t holds the node's reservation.
func (c *Conductor) continueWait(ctx context.Context, t *task, state statemachine.State) error {
	n, uuid := t.node, t.node.UUID
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
	return perr
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
