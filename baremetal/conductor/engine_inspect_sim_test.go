package conductor_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// expectedLocalGB is ironic-inspector's local_gb of an inventory: the
// smallest disk of at least 4 GiB, in GiB, minus one.
func expectedLocalGB(inv agentclient.Inventory) float64 {
	var best int64
	for _, d := range inv.Disks {
		if d.Size >= 4*gibBytes && (best == 0 || d.Size < best) {
			best = d.Size
		}
	}
	return float64(best/gibBytes - 1)
}

// transitions records the transitions of one node.
type transitions struct {
	mu  sync.Mutex
	seq []string
}

func (tr *transitions) add(e conductor.Event) {
	tr.mu.Lock()
	tr.seq = append(tr.seq, string(e.From)+">"+string(e.To))
	tr.mu.Unlock()
}

func (tr *transitions) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.seq, " ")
}

// TestInbandInspection inspects a node in-band over real HTTP: the
// conductor boots the simulated ramdisk with the inspection callback, the
// ramdisk posts its inventory, the node ends manageable with its
// properties and PXE port, powered off, and then cleans with the agent
// found through the port inspection created.
func TestInbandInspection(t *testing.T) {
	t.Parallel()
	h := newAgentHarnessFleet(t, conductor.Options{}, conductor.AgentSettings{}, simfleet.Config{})
	n := h.enrollInspectNode("inband-1", simfleet.PowerName, nil)
	tr := &transitions{}
	cancel := h.c.Subscribe(conductor.WatchFilter{Nodes: []string{n.UUID}, Types: []conductor.EventType{conductor.EventTransition}}, tr.add)
	defer cancel()

	h.must(h.c.Inspect(h.ctx, n.UUID))
	m := h.waitForFinished(n.UUID, statemachine.Manageable)
	inv := agenttest.DefaultInventory([]string{fake.MAC(n.UUID)})
	want := map[string]any{"cpu_arch": inv.CPU.Architecture, "cpus": float64(inv.CPU.Count),
		"memory_mb": float64(inv.Memory.PhysicalMB), "local_gb": expectedLocalGB(inv)}
	if inv.Memory.PhysicalMB == 0 {
		want["memory_mb"] = float64(inv.Memory.Total / (1 << 20))
	}
	for k, v := range want {
		if m.Properties[k] != v {
			t.Errorf("properties[%s] = %v, want %v (properties %v)", k, m.Properties[k], v, m.Properties)
		}
	}
	ports, err := h.store.ListPorts(h.ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 1 || ports[0].Address != fake.MAC(n.UUID) || !ports[0].PXEEnabled {
		t.Fatalf("ports after inspection = %+v, want one PXE port %s", ports, fake.MAC(n.UUID))
	}
	if m.PowerState != driver.PowerOff {
		t.Errorf("inspected node power = %q, want power off", m.PowerState)
	}
	if m.InspectionFinishedAt.IsZero() || m.InspectionFinishedAt.Before(m.InspectionStartedAt) {
		t.Errorf("inspection started %v finished %v", m.InspectionStartedAt, m.InspectionFinishedAt)
	}
	if m.LastError != "" {
		t.Errorf("last error %q after a successful inspection", m.LastError)
	}
	for _, k := range []string{"anvil_inspection_managed_boot", agentdeploy.InspectionBootKey, fake.BootRamdiskParamsKey, "anvil_intent", driver.InternalAgentToken} {
		if _, ok := m.DriverInternalInfo[k]; ok {
			t.Errorf("driver_internal_info keeps %s after inspection: %v", k, m.DriverInternalInfo[k])
		}
	}
	if got := h.fleet.Inspections(n.UUID); got != 1 {
		t.Errorf("inspection boots = %d, want 1", got)
	}
	// The inventory and plugin data the ramdisk posted are stored, read
	// back by name as by UUID.
	for _, ident := range []string{n.Name, n.UUID} {
		stored, err := h.c.NodeInventory(h.ctx, ident)
		if err != nil {
			t.Fatalf("NodeInventory(%s): %v", ident, err)
		}
		wantJSON(t, "stored inventory", stored.Inventory, inv)
		// The plugin data the ramdisk posted, with what the
		// validate-interfaces hook adds: every NIC with its PXE flag,
		// which Metal3's baremetal-operator reads.
		var inventory agentclient.Inventory
		if err := json.Unmarshal(stored.Inventory, &inventory); err != nil {
			t.Fatal(err)
		}
		wantPD := agentclient.InterfacesPluginData(&inventory, fake.MAC(n.UUID))
		wantPD["boot_interface"] = fake.MAC(n.UUID)
		wantJSON(t, "stored plugin data", stored.PluginData, wantPD)
		var pd struct {
			All map[string]struct {
				PXE bool `json:"pxe_enabled"`
			} `json:"all_interfaces"`
		}
		if err := json.Unmarshal(stored.PluginData, &pd); err != nil || len(pd.All) == 0 {
			t.Fatalf("plugin data all_interfaces: %s %v", stored.PluginData, err)
		}
		for name, i := range pd.All {
			if !i.PXE {
				t.Errorf("all_interfaces[%s].pxe_enabled is false for the interface the node booted from", name)
			}
		}
		if stored.UpdatedAt.IsZero() || stored.CreatedAt.IsZero() {
			t.Errorf("stored inventory not stamped: created %v updated %v", stored.CreatedAt, stored.UpdatedAt)
		}
	}
	wantSeq := "manageable>inspecting inspecting>inspect wait inspect wait>inspecting inspecting>manageable"
	for deadline := time.Now().Add(5 * time.Second); tr.String() != wantSeq && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := tr.String(); got != wantSeq {
		t.Errorf("transitions %q, want %q", got, wantSeq)
	}
	hist := strings.Join(h.historyEvents(n.UUID), "|")
	for _, e := range []string{"inspection ramdisk booted", "inspection data received"} {
		if !strings.Contains(hist, e) {
			t.Errorf("history lacks %q: %s", e, hist)
		}
	}
	// The port inspection created is what cleaning's ramdisk is found by.
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
}

// wantJSON checks that the JSON document got equals want once both are
// decoded (want is encoded first).
func wantJSON(t *testing.T, what string, got json.RawMessage, want any) {
	t.Helper()
	wb, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s is not JSON: %v", what, err)
	}
	if err := json.Unmarshal(wb, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, got, wb)
	}
}

// TestInbandInspectionFailureKeepsInventory inspects a node three
// times: the first inspection stores its inventory, the second (the
// ramdisk reports a different machine and an error) fails and leaves the
// first inventory in place, the third succeeds and replaces it.
func TestInbandInspectionFailureKeepsInventory(t *testing.T) {
	t.Parallel()
	var boots atomic.Int32
	h := newAgentHarnessFleet(t, conductor.Options{}, conductor.AgentSettings{}, simfleet.Config{
		Inspection: func(_ string, def agenttest.InspectionConfig) agenttest.InspectionConfig {
			inv := *def.Inventory
			switch boots.Add(1) {
			case 2:
				inv.CPU.Count = 2
				def.PluginData = map[string]any{"error": "lldp collection failed"}
			case 3:
				inv.CPU.Count = 3
			}
			def.Inventory = &inv
			return def
		}})
	n := h.enrollInspectNode("inband-keep", simfleet.PowerName, nil)
	var nr *baremetal.InventoryNotRecordedError
	if _, err := h.c.NodeInventory(h.ctx, n.UUID); !errors.As(err, &nr) || nr.Node != n.UUID || !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("inventory before any inspection = %v, want InventoryNotRecordedError naming %s", err, n.UUID)
	}
	def := agenttest.DefaultInventory([]string{fake.MAC(n.UUID)})

	h.must(h.c.Inspect(h.ctx, n.UUID))
	h.waitForFinished(n.UUID, statemachine.Manageable)
	first, err := h.c.NodeInventory(h.ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "first inventory", first.Inventory, def)

	h.must(h.c.Inspect(h.ctx, n.UUID))
	f := h.waitFor(n.UUID, statemachine.InspectFailed)
	if !strings.Contains(f.LastError, "lldp collection failed") {
		t.Fatalf("second inspection failed with %q, want the ramdisk's error", f.LastError)
	}
	kept, err := h.c.NodeInventory(h.ctx, n.UUID)
	if err != nil {
		t.Fatalf("inventory after a failed inspection: %v", err)
	}
	if !bytes.Equal(kept.Inventory, first.Inventory) || !bytes.Equal(kept.PluginData, first.PluginData) || !kept.UpdatedAt.Equal(first.UpdatedAt) {
		t.Fatalf("a failed inspection changed the inventory: %s / %s (updated %v), want %s / %s (updated %v)",
			kept.Inventory, kept.PluginData, kept.UpdatedAt, first.Inventory, first.PluginData, first.UpdatedAt)
	}

	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Inspect(h.ctx, n.UUID))
	m := h.waitForFinished(n.UUID, statemachine.Manageable)
	if m.Properties["cpus"] != float64(3) {
		t.Fatalf("third inspection: cpus %v, want 3", m.Properties["cpus"])
	}
	third, err := h.c.NodeInventory(h.ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	def.CPU.Count = 3
	wantJSON(t, "replaced inventory", third.Inventory, def)
	if !third.CreatedAt.Equal(first.CreatedAt) || third.UpdatedAt.Before(first.UpdatedAt) {
		t.Errorf("replaced inventory stamped created %v updated %v; first was created %v updated %v",
			third.CreatedAt, third.UpdatedAt, first.CreatedAt, first.UpdatedAt)
	}
	if got := boots.Load(); got != 3 {
		t.Errorf("inspection boots = %d, want 3", got)
	}
}

// waitForFinished waits for state, failing at once when the node lands
// in inspect failed instead.
func (h *agentHarness) waitForFinished(uuid string, state statemachine.State) *baremetal.Node {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := h.store.GetNode(h.ctx, uuid)
		if err != nil {
			h.t.Fatal(err)
		}
		if n.Reservation == "" && (n.ProvisionState == state || n.ProvisionState == statemachine.InspectFailed) {
			if n.ProvisionState != state {
				h.t.Fatalf("node %s is %s (last error %q), want %s", uuid, n.ProvisionState, n.LastError, state)
			}
			return n
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("node %s: state %q (reserved by %q, last error %q), want %q", uuid, n.ProvisionState, n.Reservation, n.LastError, state)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestInbandInspectionFastTrack keeps the agent up after inspection when
// fast track is enabled for the node.
func TestInbandInspectionFastTrack(t *testing.T) {
	t.Parallel()
	h := newAgentHarnessFleet(t, conductor.Options{}, conductor.AgentSettings{}, simfleet.Config{})
	n := h.enrollInspectNode("inband-ft", simfleet.PowerName, map[string]any{"fast_track": "true"})
	h.must(h.c.Inspect(h.ctx, n.UUID))
	m := h.waitForFinished(n.UUID, statemachine.Manageable)
	if m.PowerState != driver.PowerOn {
		t.Fatalf("fast-track node power after inspection = %q, want power on (agent kept)", m.PowerState)
	}
	if h.fleet.Agent(n.UUID) == nil {
		t.Fatalf("the ramdisk was stopped after a fast-track inspection")
	}
}

// TestInbandInspectionRamdiskError fails the inspection when the ramdisk
// reports an error, recording nothing and powering the node off.
func TestInbandInspectionRamdiskError(t *testing.T) {
	t.Parallel()
	h := newAgentHarnessFleet(t, conductor.Options{}, conductor.AgentSettings{}, simfleet.Config{
		Inspection: func(_ string, def agenttest.InspectionConfig) agenttest.InspectionConfig {
			def.PluginData = map[string]any{"error": "lshw crashed: no disks"}
			return def
		}})
	n := h.enrollInspectNode("inband-err", simfleet.PowerName, nil)
	h.must(h.c.Inspect(h.ctx, n.UUID))
	f := h.waitFor(n.UUID, statemachine.InspectFailed)
	if !strings.Contains(f.LastError, "Ramdisk reported error: lshw crashed: no disks") {
		t.Errorf("last error %q does not carry the ramdisk's error", f.LastError)
	}
	if f.PowerState != driver.PowerOff {
		t.Errorf("failed inspection left power %q, want power off", f.PowerState)
	}
	if _, ok := f.Properties["cpus"]; ok {
		t.Errorf("failed inspection recorded properties %v", f.Properties)
	}
	if ports, _ := h.store.ListPorts(h.ctx, n.UUID); len(ports) != 0 {
		t.Errorf("failed inspection created ports %+v", ports)
	}
	if !f.InspectionFinishedAt.IsZero() {
		t.Errorf("failed inspection set inspection_finished_at %v", f.InspectionFinishedAt)
	}
	// inspect failed can be inspected again.
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
}

// TestInbandInspectionMACOfAnotherNode fails the inspection when a MAC
// the ramdisk reports is a port of another node, naming both.
func TestInbandInspectionMACOfAnotherNode(t *testing.T) {
	t.Parallel()
	h := newAgentHarnessFleet(t, conductor.Options{}, conductor.AgentSettings{}, simfleet.Config{})
	owner := h.enrollAgentNode("mac-owner")
	n := h.enrollInspectNode("inband-dup", simfleet.PowerName, nil)
	if err := h.store.CreatePort(h.ctx, &baremetal.Port{NodeUUID: owner.UUID, Address: fake.MAC(n.UUID)}); err != nil {
		t.Fatal(err)
	}
	h.must(h.c.Inspect(h.ctx, n.UUID))
	f := h.waitFor(n.UUID, statemachine.InspectFailed)
	if !strings.Contains(f.LastError, n.UUID) || !strings.Contains(f.LastError, owner.UUID) || !strings.Contains(f.LastError, fake.MAC(n.UUID)) {
		t.Errorf("last error %q does not name the MAC and both nodes", f.LastError)
	}
	if ports, _ := h.store.ListPorts(h.ctx, n.UUID); len(ports) != 0 {
		t.Errorf("inspection created ports %+v", ports)
	}
}
