package agenttest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/driver"
)

// Backend is an in-memory agentclient.Backend and
// agentclient.InspectionBackend for tests, the quickstart and benchmarks:
// nodes with MAC addresses, BMC addresses, reservations and agent fields,
// and a record of accepted heartbeats and inspection data. OnHeartbeat and
// OnInspection, when set, run after each recorded heartbeat or inspection
// in a goroutine the Backend owns (the handler does not wait for them);
// Close waits for those goroutines.
type Backend struct {
	// OnHeartbeat is called with every recorded heartbeat. Set it before
	// the handler serves requests.
	OnHeartbeat func(agentclient.Heartbeat)
	// OnInspection is called with every recorded inspection data. Set it
	// before the handler serves requests.
	OnInspection func(agentclient.InspectionData)

	wg sync.WaitGroup

	mu     sync.RWMutex
	nodes  map[string]*backendNode // by UUID
	byName map[string]string
	byMAC  map[string]string
}

type backendNode struct {
	node        agentclient.Node
	heartbeats  int
	last        agentclient.Heartbeat
	bmc         []string // driver_info BMC addresses
	inspections []agentclient.InspectionData
}

// NewBackend returns an empty backend.
func NewBackend() *Backend {
	return &Backend{nodes: map[string]*backendNode{}, byName: map[string]string{}, byMAC: map[string]string{}}
}

// AddNode adds or replaces a node and its ports' MAC addresses.
func (b *Backend) AddNode(n agentclient.Node, macs ...string) error {
	if n.UUID == "" {
		return fmt.Errorf("agenttest: AddNode: node has no UUID")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n.UUID = strings.ToLower(n.UUID)
	n.DriverInternalInfo = maps.Clone(n.DriverInternalInfo)
	if n.DriverInternalInfo == nil {
		n.DriverInternalInfo = map[string]any{}
	}
	b.nodes[n.UUID] = &backendNode{node: n}
	if n.Name != "" {
		b.byName[n.Name] = n.UUID
	}
	for _, m := range macs {
		mac, ok := agentclient.ParseMAC(m)
		if !ok {
			return fmt.Errorf("agenttest: AddNode %s: invalid MAC address %q", n.UUID, m)
		}
		b.byMAC[mac] = n.UUID
	}
	return nil
}

// Node returns a copy of a node.
func (b *Backend) Node(uuid string) (agentclient.Node, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	bn, ok := b.nodes[strings.ToLower(uuid)]
	if !ok {
		return agentclient.Node{}, false
	}
	return copyNode(bn.node), true
}

// Update changes a node under the backend's lock: set the provision state,
// a reservation, wipe the token and so on.
func (b *Backend) Update(uuid string, f func(n *agentclient.Node)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	bn, ok := b.nodes[strings.ToLower(uuid)]
	if !ok {
		return false
	}
	f(&bn.node)
	return true
}

// HeartbeatCount is how many heartbeats were recorded for a node.
func (b *Backend) HeartbeatCount(uuid string) int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if bn, ok := b.nodes[strings.ToLower(uuid)]; ok {
		return bn.heartbeats
	}
	return 0
}

// LastHeartbeat is the last heartbeat recorded for a node.
func (b *Backend) LastHeartbeat(uuid string) (agentclient.Heartbeat, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	bn, ok := b.nodes[strings.ToLower(uuid)]
	if !ok || bn.heartbeats == 0 {
		return agentclient.Heartbeat{}, false
	}
	return bn.last, true
}

// SetBMCAddresses sets the BMC addresses of a node (the driver_info
// address fields, IPv4 or IPv6) that LookupInspectedNode matches an
// inventory's bmc_address and bmc_v6address against. It reports false when
// the node does not exist.
func (b *Backend) SetBMCAddresses(uuid string, addrs ...string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	bn, ok := b.nodes[strings.ToLower(uuid)]
	if !ok {
		return false
	}
	bn.bmc = append([]string(nil), addrs...)
	return true
}

// InspectionCount is how many times inspection data was recorded for a
// node.
func (b *Backend) InspectionCount(uuid string) int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if bn, ok := b.nodes[strings.ToLower(uuid)]; ok {
		return len(bn.inspections)
	}
	return 0
}

// Inspections returns the inspection data recorded for a node, oldest
// first. The maps and slices are copies.
func (b *Backend) Inspections(uuid string) []agentclient.InspectionData {
	b.mu.RLock()
	defer b.mu.RUnlock()
	bn, ok := b.nodes[strings.ToLower(uuid)]
	if !ok {
		return nil
	}
	out := make([]agentclient.InspectionData, len(bn.inspections))
	for i, d := range bn.inspections {
		out[i] = copyInspection(d)
	}
	return out
}

// LastInspection is the last inspection data recorded for a node.
func (b *Backend) LastInspection(uuid string) (agentclient.InspectionData, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	bn, ok := b.nodes[strings.ToLower(uuid)]
	if !ok || len(bn.inspections) == 0 {
		return agentclient.InspectionData{}, false
	}
	return copyInspection(bn.inspections[len(bn.inspections)-1]), true
}

func copyInspection(d agentclient.InspectionData) agentclient.InspectionData {
	d.RawInventory = slices.Clone(d.RawInventory)
	d.PluginData = maps.Clone(d.PluginData)
	d.Inventory.Interfaces = slices.Clone(d.Inventory.Interfaces)
	d.Inventory.Disks = slices.Clone(d.Inventory.Disks)
	return d
}

func copyNode(n agentclient.Node) agentclient.Node {
	n.DriverInternalInfo = maps.Clone(n.DriverInternalInfo)
	return n
}

// LookupNode implements agentclient.Backend.
func (b *Backend) LookupNode(_ context.Context, q agentclient.LookupQuery) (agentclient.Node, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if q.NodeUUID != "" {
		if bn, ok := b.nodes[q.NodeUUID]; ok {
			return copyNode(bn.node), nil
		}
		return agentclient.Node{}, fmt.Errorf("agenttest: node %s: %w", q.NodeUUID, agentclient.ErrNodeNotFound)
	}
	for _, mac := range q.Addresses {
		if id, ok := b.byMAC[mac]; ok {
			return copyNode(b.nodes[id].node), nil
		}
	}
	return agentclient.Node{}, fmt.Errorf("agenttest: no node has any of %d MAC addresses: %w", len(q.Addresses), agentclient.ErrNodeNotFound)
}

// GetNode implements agentclient.Backend.
func (b *Backend) GetNode(_ context.Context, ident string) (agentclient.Node, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if bn, ok := b.nodes[strings.ToLower(ident)]; ok {
		return copyNode(bn.node), nil
	}
	if id, ok := b.byName[ident]; ok {
		return copyNode(b.nodes[id].node), nil
	}
	return agentclient.Node{}, fmt.Errorf("agenttest: node %s: %w", ident, agentclient.ErrNodeNotFound)
}

// EnsureAgentToken implements agentclient.Backend.
func (b *Backend) EnsureAgentToken(_ context.Context, uuid, candidate string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bn, ok := b.nodes[uuid]
	if !ok {
		return false, fmt.Errorf("agenttest: node %s: %w", uuid, agentclient.ErrNodeNotFound)
	}
	if bn.node.AgentToken != "" {
		return false, nil
	}
	if bn.node.Reservation != "" {
		return false, fmt.Errorf("agenttest: node %s reserved by %s: %w", uuid, bn.node.Reservation, agentclient.ErrNodeLocked)
	}
	bn.node.AgentToken = candidate
	bn.node.DriverInternalInfo = maps.Clone(bn.node.DriverInternalInfo)
	bn.node.DriverInternalInfo[driver.InternalAgentToken] = candidate
	return true, nil
}

// RecordHeartbeat implements agentclient.Backend: it stores agent_url,
// agent_version, agent_last_heartbeat and the pinned certificate.
func (b *Backend) RecordHeartbeat(_ context.Context, hb agentclient.Heartbeat) error {
	b.mu.Lock()
	bn, ok := b.nodes[hb.NodeUUID]
	if !ok {
		b.mu.Unlock()
		return fmt.Errorf("agenttest: node %s: %w", hb.NodeUUID, agentclient.ErrNodeNotFound)
	}
	bn.node.AgentURL = hb.CallbackURL
	if hb.AgentVerifyCA != "" {
		bn.node.AgentVerifyCA = hb.AgentVerifyCA
	}
	dii := maps.Clone(bn.node.DriverInternalInfo)
	dii[driver.InternalAgentURL] = hb.CallbackURL
	dii[driver.InternalAgentVersion] = hb.AgentVersion
	dii[driver.InternalAgentLastHeartbeat] = hb.ReceivedAt.Format(agentclient.LastHeartbeatLayout)
	if hb.AgentVerifyCA != "" {
		dii[driver.InternalAgentVerifyCA] = hb.AgentVerifyCA
	}
	bn.node.DriverInternalInfo = dii
	bn.heartbeats++
	bn.last = hb
	hook := b.OnHeartbeat
	b.mu.Unlock()
	if hook != nil {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			hook(hb)
		}()
	}
	return nil
}

// inspectWait is the only provision state in which inspection data is
// accepted.
const inspectWait = "inspect wait"

// LookupInspectedNode implements agentclient.InspectionBackend: by node
// UUID when given, else by a port MAC, else by a BMC address set with
// SetBMCAddresses. A node that is not in "inspect wait" is not found.
func (b *Backend) LookupInspectedNode(_ context.Context, q agentclient.InspectionLookup) (agentclient.Node, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	bn := b.findInspected(q)
	if bn == nil {
		return agentclient.Node{}, fmt.Errorf("agenttest: no node matches node_uuid %q, %d MAC addresses or %d BMC addresses: %w",
			q.NodeUUID, len(q.Addresses), len(q.BMCAddresses), agentclient.ErrNodeNotFound)
	}
	if bn.node.ProvisionState != inspectWait {
		return agentclient.Node{}, fmt.Errorf("agenttest: node %s is in %q, not %q: %w", bn.node.UUID, bn.node.ProvisionState, inspectWait, agentclient.ErrNodeNotFound)
	}
	return copyNode(bn.node), nil
}

// findInspected resolves an inspection lookup; the caller holds b.mu.
func (b *Backend) findInspected(q agentclient.InspectionLookup) *backendNode {
	if q.NodeUUID != "" {
		return b.nodes[strings.ToLower(q.NodeUUID)]
	}
	for _, mac := range q.Addresses {
		if id, ok := b.byMAC[mac]; ok {
			return b.nodes[id]
		}
	}
	for _, addr := range q.BMCAddresses {
		for _, bn := range b.nodes {
			if slices.Contains(bn.bmc, addr) {
				return bn
			}
		}
	}
	return nil
}

// ContinueInspection implements agentclient.InspectionBackend: it records
// the data for a node in "inspect wait" (the node stays there; OnInspection
// may move it on). A reserved node gives ErrNodeLocked, as the conductor
// needs the node's lock to take the data.
func (b *Backend) ContinueInspection(_ context.Context, data agentclient.InspectionData) error {
	b.mu.Lock()
	bn, ok := b.nodes[data.NodeUUID]
	switch {
	case !ok:
		b.mu.Unlock()
		return fmt.Errorf("agenttest: node %s: %w", data.NodeUUID, agentclient.ErrNodeNotFound)
	case bn.node.ProvisionState != inspectWait:
		b.mu.Unlock()
		return fmt.Errorf("agenttest: node %s is in %q, not %q: %w", data.NodeUUID, bn.node.ProvisionState, inspectWait, agentclient.ErrNodeNotFound)
	case bn.node.Reservation != "":
		b.mu.Unlock()
		return fmt.Errorf("agenttest: node %s reserved by %s: %w", data.NodeUUID, bn.node.Reservation, agentclient.ErrNodeLocked)
	}
	bn.inspections = append(bn.inspections, copyInspection(data))
	hook := b.OnInspection
	b.mu.Unlock()
	if hook != nil {
		data = copyInspection(data)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			hook(data)
		}()
	}
	return nil
}

// Close waits for OnHeartbeat and OnInspection calls in flight.
func (b *Backend) Close() { b.wg.Wait() }

var (
	_ agentclient.Backend           = (*Backend)(nil)
	_ agentclient.InspectionBackend = (*Backend)(nil)
)
