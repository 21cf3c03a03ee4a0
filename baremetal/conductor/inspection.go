package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
)

// In-band inspection (Ironic's "agent" inspect interface, reference §1
// inspect wait): the inspect interface asks for a ramdisk boot
// (StepResult{Wait, RebootRequested}); the conductor boots the ramdisk
// with ipa-inspection-callback-url and parks the node in inspect wait;
// the ramdisk posts its inventory to POST /v1/continue_inspection, which
// calls the agent backend's ContinueInspection. That call only records
// the data as the node's intent (so a conductor dying before processing
// it loses nothing) and hands it to the node's owner, which processes it
// under the exclusive lock: resume, the inspect interface's hooks,
// properties and ports saved, ramdisk torn down (the node powered off
// unless fast track keeps the agent up), done.

// inspectionManagedBootKey is the conductor's own driver_internal_info
// flag saying it booted the ramdisk for this inspection (Ironic's
// inspector_manage_boot): whatever ends the inspection tears that boot
// down.
const inspectionManagedBootKey = "anvil_inspection_managed_boot"

// inspectionCallbackParam is the ramdisk parameter naming where the
// ramdisk posts its inventory.
const inspectionCallbackParam = "ipa-inspection-callback-url"

// inspectionLockPolicy paces ContinueInspection's wait for a node that is
// locked for a moment (its own power-on into the ramdisk, a token
// lookup): a request handler waits in real time, briefly.
func inspectionLockPolicy() baremetal.LockPolicy {
	return baremetal.LockPolicy{Attempts: 20, Interval: 100 * time.Millisecond, Clock: clock.System()}
}

// agentRamdiskParams are the kernel parameters of an agent ramdisk boot
// (deploy, clean, service, rescue): where the agent finds the conductor
// (IPA's ipa-api-url), for boot interfaces that hand parameters to the
// ramdisk themselves (virtual media builds them into an image); nil
// without AgentSettings.APIURL.
func (c *Conductor) agentRamdiskParams() map[string]any {
	base := strings.TrimRight(c.agent.APIURL, "/")
	if base == "" {
		return nil
	}
	return map[string]any{"ipa-api-url": base}
}

// inspectionRamdiskParams are the kernel parameters of an inspection
// ramdisk boot.
func (c *Conductor) inspectionRamdiskParams(n *baremetal.Node) (map[string]any, error) {
	base := strings.TrimRight(c.agent.APIURL, "/")
	if base == "" {
		return nil, &baremetal.InvalidFieldError{Kind: "conductor", Ident: c.host, Field: "AgentSettings.APIURL",
			Expected: fmt.Sprintf("the agent API's base URL, for the in-band inspection of node %s", n.UUID)}
	}
	return map[string]any{
		"ipa-api-url":           base,
		inspectionCallbackParam: base + "/v1/continue_inspection",
	}, nil
}

// startInbandInspection boots the ramdisk for inspection and parks the
// node in inspect wait. The node reaches inspect wait before it is
// powered, so a ramdisk that posts at once finds it waiting.
func (c *Conductor) startInbandInspection(ctx context.Context, t *task, inband bool) error {
	n := t.node
	fail := func(err error) error {
		msg := fmt.Sprintf("Failed to inspect hardware. Reason: %s", describeErr(err))
		if n.DriverInternalInfo[inspectionManagedBootKey] == true {
			if terr := c.endInspectionBoot(ctx, t, true); terr != nil {
				c.log.Warn("inspection boot not torn down after failure", "node", n.UUID, "error", terr)
			}
		}
		t.fail(ctx, msg, false)
		return err
	}
	if !inband {
		return fail(fmt.Errorf("inspect interface %q of node %s asks for a ramdisk boot but cannot process in-band inspection data", n.InspectInterface, n.UUID))
	}
	params, err := c.inspectionRamdiskParams(n)
	if err != nil {
		return fail(err)
	}
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[inspectionManagedBootKey] = true
	if err := c.prepareRamdiskBoot(ctx, t, driver.NetworkInspection, params); err != nil {
		return fail(err)
	}
	if err := t.process(ctx, statemachine.EventWait, moveOpts{keepTarget: true}); err != nil {
		return err
	}
	if err := c.powerIntoRamdisk(ctx, t); err != nil {
		return fail(err)
	}
	if err := t.save(ctx); err != nil {
		return err
	}
	c.history(ctx, n.UUID, "inspection ramdisk booted", "inspection",
		fmt.Sprintf("ramdisk booted for in-band inspection; waiting for its data at %s", params[inspectionCallbackParam]), baremetal.HistoryInfo)
	return nil
}

// endInspectionBoot tears down the ramdisk boot of an in-band inspection
// (boot and network cleaned up, then the node powered off when powerOff
// is set and the node allows it). It does nothing when the conductor did
// not boot the ramdisk. The node is not saved.
func (c *Conductor) endInspectionBoot(ctx context.Context, t *task, powerOff bool) error {
	n := t.node
	if n.DriverInternalInfo[inspectionManagedBootKey] != true {
		return nil
	}
	delete(n.DriverInternalInfo, inspectionManagedBootKey)
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		if b := d.Boot(); b != nil {
			if err := b.CleanUpRamdisk(ctx, v); err != nil {
				return err
			}
		}
		if nw := d.Network(); nw != nil {
			return nw.RemoveNetwork(ctx, v, driver.NetworkInspection)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !powerOff {
		return nil
	}
	if n.DisablePowerOff {
		// Ironic's tear_down_managed_boot reboots instead: the
		// inspection boot is gone, the node leaves the ramdisk.
		c.log.Info("rebooting out of the inspection ramdisk instead of powering off: disable_power_off is set", "node", n.UUID)
		return c.powerAction(ctx, t, driver.Reboot, 0)
	}
	return c.powerAction(ctx, t, driver.PowerOff, 0)
}

// LookupInspectedNode implements agentclient.InspectionBackend: the node
// inspection data is about, by UUID, else by its ports' MAC addresses,
// else by a BMC address in its driver_info (any *_address field, URL
// hosts compared). Only a node in inspect wait is found; anything else,
// or several nodes matching, is agentclient.ErrNodeNotFound.
func (b agentBackend) LookupInspectedNode(ctx context.Context, q agentclient.InspectionLookup) (agentclient.Node, error) {
	c := b.c
	notFound := func(why string) (agentclient.Node, error) {
		return agentclient.Node{}, fmt.Errorf("%w: inspection data: %s", agentclient.ErrNodeNotFound, why)
	}
	var n *baremetal.Node
	var err error
	switch {
	case q.NodeUUID != "":
		n, err = c.store.GetNode(ctx, q.NodeUUID)
	case len(q.Addresses) > 0:
		n, err = c.store.LookupNode(ctx, "", q.Addresses)
		if (errors.Is(err, baremetal.ErrNotFound) || errors.Is(err, baremetal.ErrInvalidInput)) && len(q.BMCAddresses) > 0 {
			n, err = c.lookupByBMC(ctx, q.BMCAddresses)
		}
	case len(q.BMCAddresses) > 0:
		n, err = c.lookupByBMC(ctx, q.BMCAddresses)
	default:
		return notFound("no node UUID, MAC or BMC address to look the node up by")
	}
	if err != nil {
		if errors.Is(err, baremetal.ErrNotFound) || errors.Is(err, baremetal.ErrInvalidInput) {
			return agentclient.Node{}, fmt.Errorf("%w: %w", agentclient.ErrNodeNotFound, err)
		}
		return agentclient.Node{}, err
	}
	if n.ProvisionState != statemachine.InspectWait {
		return notFound(fmt.Sprintf("node %s is %s, not waiting for inspection data", n.UUID, n.ProvisionState))
	}
	return c.agentNode(n), nil
}

// lookupByBMC finds the one node in inspect wait whose driver_info names
// one of addrs as its BMC address.
func (c *Conductor) lookupByBMC(ctx context.Context, addrs []string) (*baremetal.Node, error) {
	want := map[string]bool{}
	for _, a := range addrs {
		if h := bmcHost(a); h != "" {
			want[h] = true
		}
	}
	if len(want) == 0 {
		return nil, &baremetal.NotFoundError{Kind: "node", Ident: "BMC address " + strings.Join(addrs, ",")}
	}
	var found []*baremetal.Node
	page := baremetal.Page{Limit: 1000}
	for {
		batch, err := c.store.ListNodes(ctx, baremetal.NodeFilter{ProvisionStates: []statemachine.State{statemachine.InspectWait}}, page)
		if err != nil {
			return nil, err
		}
		for _, n := range batch {
			for k, v := range n.DriverInfo {
				s, ok := v.(string)
				if ok && strings.HasSuffix(k, "_address") && want[bmcHost(s)] {
					found = append(found, n)
					break
				}
			}
		}
		if len(batch) < page.Limit {
			break
		}
		page.Marker = batch[len(batch)-1].UUID
	}
	if len(found) != 1 {
		return nil, &baremetal.NotFoundError{Kind: "node", Ident: fmt.Sprintf("BMC address %s (%d nodes in inspect wait match)", strings.Join(addrs, ","), len(found))}
	}
	return found[0], nil
}

// bmcHost reduces a BMC address (an IP, a host name, host:port or a URL)
// to its host, lower case, IPs in canonical form.
func bmcHost(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if strings.Contains(s, "://") {
		if u, err := url.Parse(s); err == nil {
			s = u.Hostname()
		}
	} else if h, _, err := net.SplitHostPort(s); err == nil {
		s = h
	}
	s = strings.Trim(s, "[]")
	if ip := net.ParseIP(s); ip != nil {
		return ip.String()
	}
	return strings.ToLower(s)
}

// ContinueInspection implements agentclient.InspectionBackend: it records
// the data as the node's intent under the node's lock and hands it to the
// owner's workers, returning without waiting for the processing. The
// node must be in inspect wait (else ErrNodeNotFound); a node locked for
// longer than a moment, or with other work pending, is ErrNodeLocked.
func (b agentBackend) ContinueInspection(ctx context.Context, data agentclient.InspectionData) error {
	c := b.c
	if !c.running.Load() {
		return ErrConductorNotRunning
	}
	locked, err := baremetal.AcquireNode(ctx, c.locks(), data.NodeUUID, c.host, inspectionLockPolicy())
	if err != nil {
		switch {
		case errors.Is(err, baremetal.ErrNodeLocked):
			return fmt.Errorf("%w: %w", agentclient.ErrNodeLocked, err)
		case errors.Is(err, baremetal.ErrNotFound):
			return fmt.Errorf("%w: %w", agentclient.ErrNodeNotFound, err)
		}
		return err
	}
	t := c.newTask(locked)
	handed := false
	defer func() {
		if !handed {
			t.release()
		}
	}()
	n := t.node
	if n.ProvisionState != statemachine.InspectWait {
		return fmt.Errorf("%w: inspection data for node %s, which is %s, not waiting for it", agentclient.ErrNodeNotFound, n.UUID, n.ProvisionState)
	}
	if err := c.checkServed(n); err != nil {
		return err
	}
	if in, ok := readIntent(n); ok && in.Op != opContinueInspection {
		return fmt.Errorf("%w: node %s has a pending %s operation", agentclient.ErrNodeLocked, n.UUID, in.Op)
	}
	raw := data.RawInventory
	if len(raw) == 0 {
		if raw, err = json.Marshal(data.Inventory); err != nil {
			return fmt.Errorf("node %s: inspection inventory: %w", n.UUID, err)
		}
	}
	args := map[string]any{"inventory": string(raw)}
	if len(data.PluginData) > 0 {
		// Through JSON, as the intent reads back from the store.
		b, err := json.Marshal(data.PluginData)
		if err != nil {
			return fmt.Errorf("node %s: inspection plugin data: %w", n.UUID, err)
		}
		var pd map[string]any
		if err := json.Unmarshal(b, &pd); err != nil {
			return fmt.Errorf("node %s: inspection plugin data: %w", n.UUID, err)
		}
		args["plugin_data"] = pd
	}
	received := data.ReceivedAt
	if received.IsZero() {
		received = c.clock.Now()
	}
	args["received_at"] = received.UTC().Format(time.RFC3339Nano)
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[intentKey] = intent{Op: opContinueInspection, RequestedAt: c.clock.Now(), Args: args}.encode()
	if err := t.save(ctx); err != nil {
		return err
	}
	c.history(ctx, n.UUID, "inspection data received", "inspection",
		fmt.Sprintf("inspection data received from the ramdisk (%d bytes of inventory); processing queued", len(raw)), baremetal.HistoryInfo)
	// The inspection ramdisk's first contact is this post, not a
	// heartbeat: its boot is a span of the inspection's trace.
	c.traceBoot(ctx, n)
	handed = true
	c.submit(job{uuid: n.UUID, kind: jobIntent, node: n})
	return nil
}

// doContinueInspection processes posted inspection data on the node's
// owner, under its lock (Ironic's continue_inspection): resume, hooks,
// properties and ports saved, inspection boot torn down (powered off
// unless fast track applies), inventory stored, done. Data for a node no
// longer in inspect wait (aborted, timed out) is dropped with a history
// note.
//
// The inventory and plugin data are stored once everything that can fail
// the inspection has succeeded, just before the final state write: a
// failed inspection never replaces the node's previous inventory, and a
// failed save fails the inspection (last_error names it). The store has
// no transaction spanning the inventory and the node, so the save is one
// atomic upsert of its own, keyed by the node, made under the node's
// lock: running it again stores the same documents again, so a retry is
// harmless. Only a crash between the save and the state write can leave
// the new inventory with a node that never reaches manageable (start-up
// recovery then fails the inspection); that inventory is what the
// ramdisk reported and every hook accepted, and the next successful
// inspection replaces it.
func (c *Conductor) doContinueInspection(ctx context.Context, t *task, in intent) error {
	t.consumeIntent()
	n := t.node
	if n.ProvisionState != statemachine.InspectWait {
		c.history(ctx, n.UUID, "inspection data dropped", "inspection",
			fmt.Sprintf("inspection data received at %v dropped: the node is %s, no longer waiting for it", in.Args["received_at"], n.ProvisionState), baremetal.HistoryWarning)
		return t.save(ctx)
	}
	raw, _ := in.Args["inventory"].(string)
	pd, _ := in.Args["plugin_data"].(map[string]any)
	if pd == nil {
		// The hooks record their results in the plugin data.
		pd = map[string]any{}
	}
	if err := t.process(ctx, statemachine.EventResume, moveOpts{keepTarget: true}); err != nil {
		return err
	}
	// An inventory the store would refuse fails the inspection before
	// the hooks write anything.
	if err := baremetal.CheckInventory(n.UUID, &baremetal.NodeInventory{Inventory: json.RawMessage(raw)}); err != nil {
		return c.inspectionFailed(ctx, t, fmt.Sprintf("Failed to process inspection data for node %s: %s", n.UUID, describeErr(err)), err)
	}
	if err := c.applyInspectionData(ctx, t, driver.InspectionData{Inventory: json.RawMessage(raw), PluginData: pd}); err != nil {
		return c.inspectionFailed(ctx, t, fmt.Sprintf("Failed to process inspection data for node %s: %s", n.UUID, describeErr(err)), err)
	}
	// The plugin data as the hooks left it, as Ironic stores it.
	inv, err := inspectionInventory(raw, pd)
	if err != nil {
		return c.inspectionFailed(ctx, t, fmt.Sprintf("Failed to store the inspection inventory of node %s: %s", n.UUID, describeErr(err)), err)
	}
	powerOff := !c.fastTrackable(t)
	if err := c.endInspectionBoot(ctx, t, powerOff); err != nil {
		return c.inspectionFailed(ctx, t, fmt.Sprintf("Failed to tear down the inspection ramdisk of node %s: %s", n.UUID, describeErr(err)), err)
	}
	if err := c.store.SaveNodeInventory(ctx, n.UUID, inv); err != nil {
		return c.inventoryNotSaved(ctx, t, powerOff, err)
	}
	// Sizes only: the documents can be large and plugin data may carry
	// the ramdisk's logs.
	c.log.Info("inspection inventory stored", "node", n.UUID, "inventory_bytes", len(inv.Inventory), "plugin_data_bytes", len(inv.PluginData))
	if powerOff {
		wipeAgent(n)
	}
	n.InspectionFinishedAt = c.clock.Now().UTC()
	return t.process(ctx, statemachine.EventDone, moveOpts{})
}

// inspectionInventory is the NodeInventory of a successful inspection:
// the raw inventory the ramdisk posted and the plugin data.
func inspectionInventory(raw string, pd map[string]any) (*baremetal.NodeInventory, error) {
	plugin := []byte("{}")
	if len(pd) > 0 {
		b, err := json.Marshal(pd)
		if err != nil {
			return nil, fmt.Errorf("encoding the plugin data: %w", err)
		}
		plugin = b
	}
	return &baremetal.NodeInventory{Inventory: json.RawMessage(raw), PluginData: plugin}, nil
}

// inventoryNotSaved fails an inspection whose inventory could not be
// stored. The inspection boot is already torn down; a ramdisk fast track
// kept running (poweredOff false) is powered off, as after any failed
// inspection.
func (c *Conductor) inventoryNotSaved(ctx context.Context, t *task, poweredOff bool, cause error) error {
	n := t.node
	if !poweredOff && !n.DisablePowerOff {
		if err := c.powerAction(ctx, t, driver.PowerOff, 0); err != nil {
			c.log.Warn("inspection ramdisk not powered off after failure", "node", n.UUID, "error", err)
		}
	}
	wipeAgent(n)
	t.fail(ctx, fmt.Sprintf("Failed to store the inspection inventory of node %s: %s", n.UUID, describeErr(cause)), false)
	return fmt.Errorf("node %s: inspection failed: storing the inventory: %w", n.UUID, cause)
}

// inspectionFailed tears the inspection boot down (powering the node
// off) and fails the inspection with msg.
func (c *Conductor) inspectionFailed(ctx context.Context, t *task, msg string, cause error) error {
	n := t.node
	if err := c.endInspectionBoot(ctx, t, true); err != nil {
		c.log.Warn("inspection ramdisk not torn down after failure", "node", n.UUID, "error", err)
	}
	wipeAgent(n)
	t.fail(ctx, msg, false)
	return fmt.Errorf("node %s: inspection failed: %w", n.UUID, cause)
}

// MACInUseError is a port an inspection would create whose MAC address
// belongs to a port of another node (MACs are unique across nodes).
type MACInUseError struct {
	MAC       string
	Node      string
	OtherNode string
	OtherPort string
}

func (e *MACInUseError) Error() string {
	return fmt.Sprintf("MAC address %s reported by node %s is already used by port %s of node %s", e.MAC, e.Node, e.OtherPort, e.OtherNode)
}

// Is matches ErrDuplicate.
func (e *MACInUseError) Is(target error) bool { return target == baremetal.ErrDuplicate }

// applyInspectionData runs the node's in-band inspector over data and
// saves what it found: properties (and the rest of the node with the next
// write) and ports, new ports created and the ports it dropped deleted.
// Nothing is written when the inspector fails, or when a new port's MAC
// belongs to another node.
func (c *Conductor) applyInspectionData(ctx context.Context, t *task, data driver.InspectionData) error {
	n := t.node
	d, err := t.driver()
	if err != nil {
		return err
	}
	ib, ok := d.Inspect().(driver.InbandInspector)
	if !ok {
		return fmt.Errorf("inspect interface %q cannot process in-band inspection data", n.InspectInterface)
	}
	v, err := t.view(ctx)
	if err != nil {
		return err
	}
	if err := ib.ContinueInspection(ctx, v, data); err != nil {
		return err
	}
	ch := v.Changes()
	if ch.PortsChanged {
		kept := map[string]bool{}
		for _, p := range ch.Ports {
			if p.UUID != "" {
				kept[p.UUID] = true
				continue
			}
			other, err := c.store.GetPort(ctx, p.Address)
			switch {
			case err == nil && other.NodeUUID != n.UUID:
				return &MACInUseError{MAC: strings.ToLower(p.Address), Node: n.UUID, OtherNode: other.NodeUUID, OtherPort: other.UUID}
			case err != nil && !errors.Is(err, baremetal.ErrNotFound):
				return err
			}
		}
		remaining := t.ports[:0:0]
		for _, p := range t.ports {
			if kept[p.UUID] {
				remaining = append(remaining, p)
				continue
			}
			if err := c.store.DeletePort(ctx, p.UUID); err != nil && !errors.Is(err, baremetal.ErrNotFound) {
				return fmt.Errorf("node %s: delete port %s: %w", n.UUID, p.Address, err)
			}
			c.history(ctx, n.UUID, "port removed by inspection", "inspection", fmt.Sprintf("port %s (%s) removed: not kept by inspection", p.UUID, p.Address), baremetal.HistoryInfo)
		}
		t.ports = remaining
	}
	return t.absorb(ctx, v)
}

// NodeInventory returns the stored inspection inventory of node ident
// (UUID or name), as Ironic's GET /v1/nodes/{node}/inventory does. A node
// without one gives an *InventoryNotRecordedError, an unknown node a
// *NotFoundError; both match ErrNotFound.
func (c *Conductor) NodeInventory(ctx context.Context, ident string) (*baremetal.NodeInventory, error) {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return nil, err
	}
	return c.store.GetNodeInventory(ctx, n.UUID)
}

// storeOOBInventory stores the inventory an out-of-band inspect interface
// left under driver.InspectionInventoryKey (and removes it from
// driver_internal_info), with the plugin data of the validate-interfaces
// hook (all_interfaces with each NIC's pxe_enabled, valid_interfaces,
// macs), as Ironic's Redfish inspection stores its inventory and plugin
// data. A node whose interface left none keeps its previous inventory.
func (c *Conductor) storeOOBInventory(ctx context.Context, t *task) error {
	n := t.node
	raw, ok := n.DriverInternalInfo[driver.InspectionInventoryKey]
	if !ok {
		return nil
	}
	delete(n.DriverInternalInfo, driver.InspectionInventoryKey)
	doc, err := json.Marshal(raw)
	if err != nil {
		return fmt.Errorf("encoding the inventory: %w", err)
	}
	var inv agentclient.Inventory
	if err := json.Unmarshal(doc, &inv); err != nil {
		return fmt.Errorf("the inventory is not in IPA's format: %w", err)
	}
	ni, err := inspectionInventory(string(doc), agentclient.InterfacesPluginData(&inv, agentclient.PXEMAC(&inv, nil)))
	if err != nil {
		return err
	}
	if err := baremetal.CheckInventory(n.UUID, ni); err != nil {
		return err
	}
	if err := c.store.SaveNodeInventory(ctx, n.UUID, ni); err != nil {
		return err
	}
	c.log.Info("inspection inventory stored", "node", n.UUID, "inventory_bytes", len(ni.Inventory), "plugin_data_bytes", len(ni.PluginData))
	return nil
}
