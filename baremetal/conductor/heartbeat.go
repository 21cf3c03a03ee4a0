package conductor

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
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
	if tok, _ := n.DriverInternalInfo[driver.InternalAgentToken].(string); tok != "" && !c.unanswered.holds(n.UUID, tok) {
		t.release()
		return false, nil
	}
	// No token, or one that reached no agent: a lookup of this conductor
	// wrote it and answered an error, the write's outcome lost to the
	// database going away (its commit landed, its answer did not). It is
	// replaced by candidate, so the agent looking up again is not locked
	// out by a token nobody was given.
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[driver.InternalAgentToken] = candidate
	if rs, ok := c.store.(baremetal.ReleasingNodeStore); ok {
		// The token is written and the node released in one statement,
		// so the answer disclosing the token follows its commit at once:
		// a token is disclosed once, and a conductor that dies between
		// the commit and the answer locks the agent out for good (as in
		// Ironic), so that window is kept as short as it can be.
		if err := rs.UpdateNodeReleasing(ctx, n, c.host, nil); err != nil {
			c.noteUnanswered(n.UUID, candidate, err)
			t.release()
			return false, err
		}
		c.resv.released(n.UUID)
		c.unanswered.forget(n.UUID)
		return true, nil
	}
	defer t.release()
	if err := t.save(ctx); err != nil {
		c.noteUnanswered(n.UUID, candidate, err)
		return false, err
	}
	c.unanswered.forget(n.UUID)
	return true, nil
}

// noteUnanswered remembers candidate, the token a lookup of node uuid
// failed to write with err, when err leaves the write's outcome unknown
// (the database went away mid-statement: the commit may have landed with
// its answer lost). The lookup answers an error, so the token reaches no
// agent; the agent's next lookup on this conductor finds it stored and
// replaces it (EnsureAgentToken) instead of answering the masked value,
// which would lock the agent out for a token it never had.
func (c *Conductor) noteUnanswered(uuid, candidate string, err error) {
	if baremetal.IsStoreUnavailable(err) {
		c.unanswered.add(uuid, candidate)
	}
}

// maxUnanswered bounds the tokens remembered per node by noteUnanswered:
// lookups failing one after another through a database outage.
const maxUnanswered = 8

// unansweredTokens holds, per node, the tokens of lookups whose write's
// outcome was lost (noteUnanswered). An entry lives in the conductor that
// wrote it, the only process that knows the token went unanswered; it is
// dropped by the node's next successful lookup on this conductor.
type unansweredTokens struct {
	mu     sync.Mutex
	tokens map[string][]string
}

func (u *unansweredTokens) add(uuid, token string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tokens == nil {
		u.tokens = map[string][]string{}
	}
	l := append(u.tokens[uuid], token)
	if len(l) > maxUnanswered {
		l = l[len(l)-maxUnanswered:]
	}
	u.tokens[uuid] = l
}

// holds reports whether stored, node uuid's stored token, is one of the
// node's unanswered tokens. When it is not, the remembered tokens no
// longer matter (stored reached an agent) and are forgotten.
func (u *unansweredTokens) holds(uuid, stored string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, tok := range u.tokens[uuid] {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(stored)) == 1 {
			return true
		}
	}
	delete(u.tokens, uuid)
	return false
}

// forget drops node uuid's unanswered tokens: a token of its was written
// and answered.
func (u *unansweredTokens) forget(uuid string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.tokens, uuid)
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

// heartbeatTaken drops hb, node uuid's pending heartbeat, once a worker
// holds the node to process it (or could not take it): a newer heartbeat
// received meanwhile stays, with the job queued for it.
func (c *Conductor) heartbeatTaken(uuid string, hb agentclient.Heartbeat) {
	c.hbMu.Lock()
	defer c.hbMu.Unlock()
	if cur, ok := c.pendingHB[uuid]; ok && cur.ReceivedAt.Equal(hb.ReceivedAt) {
		delete(c.pendingHB, uuid)
	}
}

// processHeartbeat records the latest heartbeat of a node and continues
// whatever waits for it (reference §7.2).
func (c *Conductor) processHeartbeat(ctx context.Context, uuid string) {
	c.hbMu.Lock()
	hb, ok := c.pendingHB[uuid]
	c.hbMu.Unlock()
	if !ok {
		return
	}
	// The heartbeat stays pending until this worker holds the node or
	// knows it cannot: a callback timeout check running meanwhile sees
	// that the agent called in time. On a loaded database the
	// reservation waits seconds for a connection, and a check that found
	// nothing pending then took the node and failed it.
	n, err := c.reserve(ctx, uuid)
	if err != nil && c.lockedBySelf(err) && c.clock.Now().Sub(hb.ReceivedAt) < heartbeatRetryWindow {
		// Held by this very conductor: its callback timeout check, which
		// looks for a pending heartbeat again once it holds the node, or
		// an operation about to end. The heartbeat stays pending, so the
		// check sees that the agent called and spares the node, and its
		// job is tried again once the hold ends. Dropping it here (as
		// for a node another conductor holds) made the check find
		// nothing pending and fail a node whose agent had just called.
		c.retryHeartbeat(uuid)
		return
	}
	c.heartbeatTaken(uuid, hb)
	if err != nil {
		// Locked by another conductor: Ironic drops the heartbeat; the
		// agent sends another.
		c.log.Debug("heartbeat dropped: the node is locked", "node", uuid, "error", err)
		return
	}
	// The agent API chose this conductor (its rings may briefly disagree
	// with ours): it continues the node unless it cannot serve it.
	if !c.servesNode(n) {
		c.releaseQuietly(n.UUID)
		c.log.Debug("heartbeat dropped: this conductor does not serve the node", "node", uuid)
		return
	}
	t := c.newTask(n)
	defer t.release()
	if !c.heartbeatTokenCurrent(n, hb) {
		// Accepted with the token of the node's previous boot, which a
		// power action has since wiped (and the new boot's lookup may
		// have replaced): Ironic's conductor checks the token under the
		// node's lock and refuses such a heartbeat. Processing it would
		// pin the previous boot's URL and certificate, and the next
		// command would go to a ramdisk that is gone. The current boot's
		// agent sends its own.
		c.log.Info("heartbeat of a previous boot dropped: its agent token is no longer the node's", "node", uuid)
		return
	}
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

// heartbeatRetryWindow bounds how long after its arrival a heartbeat
// whose node this conductor holds is tried again (processHeartbeat):
// past it the heartbeat is dropped, and the agent's next one counts.
const heartbeatRetryWindow = 10 * time.Second

// heartbeatRetryPause is the pause before a heartbeat whose node this
// conductor held is tried again.
const heartbeatRetryPause = 200 * time.Millisecond

// lockedBySelf reports whether err, from a reservation, says this
// conductor holds the node.
func (c *Conductor) lockedBySelf(err error) bool {
	var locked *baremetal.NodeLockedError
	return errors.As(err, &locked) && strings.EqualFold(locked.Holder, c.host)
}

// retryHeartbeat queues node uuid's pending heartbeat again after a
// short real-time pause (on the conductor's laterSet, which Stop ends).
// The queue holds one heartbeat job per node, so the retries of
// heartbeats that met the same hold merge into one.
func (c *Conductor) retryHeartbeat(uuid string) {
	c.later.after(heartbeatRetryPause, func() {
		c.queue.push(job{uuid: uuid, kind: jobHeartbeat})
	})
}

// heartbeatTokenCurrent reports whether hb carries the node's current
// agent token (the stored one, or the one a lookup deposited during a
// power action into the ramdisk). A heartbeat recorded without a token
// (a backend caller other than the agent API's handler, which refuses
// one without) matches a node without one.
func (c *Conductor) heartbeatTokenCurrent(n *baremetal.Node, hb agentclient.Heartbeat) bool {
	stored, _ := n.DriverInternalInfo[driver.InternalAgentToken].(string)
	if (stored == "" && hb.AgentToken == "") || agentclient.TokensEqual(stored, hb.AgentToken) {
		return true
	}
	pending := c.pendingToken(n.UUID)
	return pending != "" && agentclient.TokensEqual(pending, hb.AgentToken)
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
