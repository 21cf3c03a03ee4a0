package conductor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

const gibBytes = int64(1) << 30

// enrollInspectNode enrolls a node inspected in-band (agent inspect
// interface) whose power is power ("sim" boots simulated ramdisks, "fake"
// boots nothing) and makes it manageable.
func (h *agentHarness) enrollInspectNode(name, power string, driverInfo map[string]any) *baremetal.Node {
	h.t.Helper()
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName(name), Driver: builtin.FakeHardware,
		PowerInterface: power, DeployInterface: agentdeploy.Name, InspectInterface: agentdeploy.InspectName,
		DriverInfo:   driverInfo,
		InstanceInfo: map[string]any{"image_source": "http://images.example/ubuntu.qcow2", "image_checksum": "0123456789abcdef0123456789abcdef"}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.must(h.c.Manage(h.ctx, n.UUID))
	return h.waitFor(n.UUID, statemachine.Manageable)
}

// postInspection posts inspection data for node to the agent API as a
// ramdisk does (API 1.84, node_uuid) and returns the HTTP status.
func (h *agentHarness) postInspection(nodeUUID string, inv agentclient.Inventory, extra map[string]any) int {
	h.t.Helper()
	body := map[string]any{"inventory": inv}
	for k, v := range extra {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		h.t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, h.apiURL+"/v1/continue_inspection?node_uuid="+nodeUUID, bytes.NewReader(b))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.84")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// testInventory is a small machine's inventory with the given MACs (the
// first with an IPv4 address and the PXE interface).
func testInventory(macs []string) agentclient.Inventory {
	inv := agentclient.Inventory{
		CPU:    agentclient.InventoryCPU{Count: 4, Architecture: "aarch64"},
		Memory: agentclient.InventoryMemory{Total: 8 * gibBytes, PhysicalMB: 8192},
		Disks:  []agentclient.InventoryDisk{{Name: "/dev/vda", Size: 100 * gibBytes}},
		Boot:   &agentclient.BootInfo{PXEInterface: macs[0]},
	}
	for i, m := range macs {
		iface := agentclient.InventoryInterface{Name: fmt.Sprintf("eth%d", i), MACAddress: m, HasCarrier: true}
		if i == 0 {
			iface.IPv4Address = "192.0.2.50"
		}
		inv.Interfaces = append(inv.Interfaces, iface)
	}
	return inv
}

// historyEvents returns the node's history events, in order.
func (h *agentHarness) historyEvents(uuid string) []string {
	h.t.Helper()
	hist, err := h.store.ListHistory(h.ctx, uuid, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	out := make([]string, 0, len(hist))
	for _, e := range hist {
		out = append(out, e.Event)
	}
	return out
}

// TestInspectionAbortDropsLatePost aborts a node in inspect wait (fake
// power: no ramdisk posts on its own) and posts its data afterwards: the
// API answers 404 and nothing changes.
func TestInspectionAbortDropsLatePost(t *testing.T) {
	t.Parallel()
	h := newAgentHarnessFleet(t, conductor.Options{}, conductor.AgentSettings{}, simfleet.Config{})
	n := h.enrollInspectNode("inband-abort", fake.Name, nil)
	h.must(h.c.Inspect(h.ctx, n.UUID))
	w := h.waitFor(n.UUID, statemachine.InspectWait)
	params, _ := w.DriverInternalInfo[fake.BootRamdiskParamsKey].(map[string]any)
	if params["ipa-inspection-callback-url"] != h.apiURL+"/v1/continue_inspection" || params["ipa-api-url"] != h.apiURL {
		t.Fatalf("ramdisk prepared with %v, want the inspection callback under %s", params, h.apiURL)
	}
	if w.PowerState != driver.PowerOn || w.InspectionStartedAt.IsZero() {
		t.Fatalf("node waiting for inspection: power %q, inspection_started_at %v", w.PowerState, w.InspectionStartedAt)
	}
	h.must(h.c.Abort(h.ctx, n.UUID))
	f := h.waitFor(n.UUID, statemachine.InspectFailed)
	if f.LastError != "Inspection aborted by request" || f.PowerState != driver.PowerOff {
		t.Fatalf("aborted inspection: last error %q, power %q", f.LastError, f.PowerState)
	}
	if _, ok := f.DriverInternalInfo[fake.BootRamdiskParamsKey]; ok {
		t.Errorf("abort left the inspection ramdisk prepared")
	}
	before := f.Version
	if code := h.postInspection(n.UUID, testInventory([]string{fake.MAC(n.UUID)}), nil); code != http.StatusNotFound {
		t.Fatalf("late inspection post: HTTP %d, want 404", code)
	}
	after, _ := h.store.GetNode(h.ctx, n.UUID)
	if after.Version != before || after.ProvisionState != statemachine.InspectFailed {
		t.Fatalf("late post changed the node: version %d -> %d, state %s", before, after.Version, after.ProvisionState)
	}
}

// TestInspectWaitTimeoutInband times a silent ramdisk out (measured from
// inspection_started_at) and refuses its data afterwards.
func TestInspectWaitTimeoutInband(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	h := newAgentHarnessFleet(t, conductor.Options{Clock: clock, CheckProvisionStateInterval: -1, SyncPowerStateInterval: -1,
		PowerFailureRecoveryInterval: -1}, conductor.AgentSettings{}, simfleet.Config{})
	n := h.enrollInspectNode("inband-timeout", fake.Name, nil)
	h.must(h.c.Inspect(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.InspectWait)
	clock.Advance(29 * time.Minute)
	h.c.CheckTimeouts(h.ctx)
	if got, _ := h.store.GetNode(h.ctx, n.UUID); got.ProvisionState != statemachine.InspectWait {
		t.Fatalf("after 29 minutes: %s, want still inspect wait", got.ProvisionState)
	}
	clock.Advance(2 * time.Minute)
	h.c.CheckTimeouts(h.ctx)
	f := h.waitFor(n.UUID, statemachine.InspectFailed)
	if !strings.Contains(f.LastError, "Timeout reached while inspecting") {
		t.Fatalf("last error %q", f.LastError)
	}
	// The inspection boot is torn down and the node powered off.
	if f.PowerState != driver.PowerOff {
		t.Errorf("power after the timeout: %q, want power off", f.PowerState)
	}
	if _, ok := f.DriverInternalInfo[fake.BootRamdiskParamsKey]; ok {
		t.Errorf("ramdisk boot parameters left after the timeout: %v", f.DriverInternalInfo[fake.BootRamdiskParamsKey])
	}
	if code := h.postInspection(n.UUID, testInventory([]string{fake.MAC(n.UUID)}), nil); code != http.StatusNotFound {
		t.Fatalf("post after the timeout: HTTP %d, want 404", code)
	}
}

// TestContinueInspectionOnlyInInspectWait posts data for a manageable
// node (by UUID and by MAC): 404 both times, and the node is untouched.
func TestContinueInspectionOnlyInInspectWait(t *testing.T) {
	t.Parallel()
	h := newAgentHarnessFleet(t, conductor.Options{}, conductor.AgentSettings{}, simfleet.Config{})
	n := h.enrollInspectNode("inband-404", fake.Name, nil)
	mac := "52:54:00:0f:0f:0f"
	if err := h.store.CreatePort(h.ctx, &baremetal.Port{NodeUUID: n.UUID, Address: mac}); err != nil {
		t.Fatal(err)
	}
	before, _ := h.store.GetNode(h.ctx, n.UUID)
	if code := h.postInspection(n.UUID, testInventory([]string{mac}), nil); code != http.StatusNotFound {
		t.Errorf("post by node_uuid for a manageable node: HTTP %d, want 404", code)
	}
	if code := h.postInspection("", testInventory([]string{mac}), nil); code != http.StatusNotFound {
		t.Errorf("post by MAC for a manageable node: HTTP %d, want 404", code)
	}
	after, _ := h.store.GetNode(h.ctx, n.UUID)
	if after.Version != before.Version {
		t.Errorf("refused posts changed the node (version %d -> %d)", before.Version, after.Version)
	}
	// The same post for the node in inspect wait is accepted and applied.
	h.must(h.c.Inspect(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.InspectWait)
	if code := h.postInspection("", testInventory([]string{mac, "52:54:00:0f:0f:10"}), map[string]any{"boot_interface": mac}); code != http.StatusAccepted {
		t.Fatalf("post by MAC for a node in inspect wait: HTTP %d, want 202", code)
	}
	m := h.waitFor(n.UUID, statemachine.Manageable)
	want := map[string]any{"cpu_arch": "aarch64", "cpus": 4.0, "memory_mb": 8192.0, "local_gb": 99.0}
	for k, v := range want {
		if m.Properties[k] != v {
			t.Errorf("properties[%s] = %v, want %v", k, m.Properties[k], v)
		}
	}
	ports, _ := h.store.ListPorts(h.ctx, n.UUID)
	if len(ports) != 1 || ports[0].Address != mac {
		t.Errorf("ports %+v, want only the existing PXE port %s (add_ports pxe, keep_ports all)", ports, mac)
	}
}

// TestLookupInspectedNode finds nodes in inspect wait by UUID, port MAC
// and BMC address (IP, host:port, URL forms in driver_info), and nothing
// else.
func TestLookupInspectedNode(t *testing.T) {
	t.Parallel()
	h := newAgentHarnessFleet(t, conductor.Options{}, conductor.AgentSettings{}, simfleet.Config{})
	ib, ok := h.c.AgentBackend().(agentclient.InspectionBackend)
	if !ok {
		t.Fatal("the conductor's agent backend is not an InspectionBackend")
	}
	waiting := func(name string, di map[string]any) *baremetal.Node {
		n := h.enrollInspectNode(name, fake.Name, di)
		h.must(h.c.Inspect(h.ctx, n.UUID))
		return h.waitFor(n.UUID, statemachine.InspectWait)
	}
	a := waiting("bmc-ip", map[string]any{"ipmi_address": "192.0.2.17"})
	b := waiting("bmc-url", map[string]any{"redfish_address": "https://[2001:db8::9]:8443/redfish/v1"})
	c := waiting("bmc-hostport", map[string]any{"fake_address": "BMC-3.example.com:623"})
	idle := h.enrollInspectNode("bmc-idle", fake.Name, map[string]any{"ipmi_address": "192.0.2.99"})
	mac := "52:54:00:0e:0e:0e"
	if err := h.store.CreatePort(h.ctx, &baremetal.Port{NodeUUID: a.UUID, Address: mac}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		q    agentclient.InspectionLookup
		want string // "" = not found
	}{
		{"uuid", agentclient.InspectionLookup{NodeUUID: b.UUID}, b.UUID},
		{"mac", agentclient.InspectionLookup{Addresses: []string{"52:54:00:99:99:99", mac}}, a.UUID},
		{"bmc ip", agentclient.InspectionLookup{BMCAddresses: []string{"192.0.2.17"}}, a.UUID},
		{"bmc ipv6 from url", agentclient.InspectionLookup{BMCAddresses: []string{"2001:db8:0::9"}}, b.UUID},
		{"bmc host name", agentclient.InspectionLookup{BMCAddresses: []string{"bmc-3.example.com"}}, c.UUID},
		{"unknown mac falls back to bmc", agentclient.InspectionLookup{Addresses: []string{"52:54:00:99:99:99"}, BMCAddresses: []string{"192.0.2.17"}}, a.UUID},
		{"node not waiting, by uuid", agentclient.InspectionLookup{NodeUUID: idle.UUID}, ""},
		{"node not waiting, by bmc", agentclient.InspectionLookup{BMCAddresses: []string{"192.0.2.99"}}, ""},
		{"nothing matches", agentclient.InspectionLookup{BMCAddresses: []string{"198.51.100.1"}}, ""},
		{"nothing to look up by", agentclient.InspectionLookup{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ib.LookupInspectedNode(h.ctx, tc.q)
			if tc.want == "" {
				if !errors.Is(err, agentclient.ErrNodeNotFound) {
					t.Fatalf("lookup = %+v, %v; want ErrNodeNotFound", got.UUID, err)
				}
				return
			}
			if err != nil || got.UUID != tc.want || got.ProvisionState != statemachine.InspectWait {
				t.Fatalf("lookup = %q (%s), %v; want %s in inspect wait", got.UUID, got.ProvisionState, err, tc.want)
			}
		})
	}
}

func inspectRegistry(t *testing.T) *driver.Registry {
	t.Helper()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindInspect: {fake.Name, agentdeploy.InspectName}}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	in, err := agentdeploy.NewInspect(agentdeploy.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindInspect, agentdeploy.InspectName, in); err != nil {
		t.Fatal(err)
	}
	return reg
}

func startConductor(t *testing.T, store baremetal.Store, reg *driver.Registry, host string, workers int) *conductor.Conductor {
	t.Helper()
	return startConductorClock(t, store, reg, host, workers, nil)
}

// startConductorClock starts a conductor whose periodic tasks only run
// when the test calls them, on clock (nil: the system clock).
func startConductorClock(t *testing.T, store baremetal.Store, reg *driver.Registry, host string, workers int, clock clock.Clock) *conductor.Conductor {
	t.Helper()
	c, err := conductor.New(store, reg, conductor.Options{Agent: conductor.AgentSettings{APIURL: "http://127.0.0.1:1"}, Hostname: host, Clock: clock,
		Workers: workers, Logger: testLogger(t), IntentPollInterval: -1, CheckProvisionStateInterval: -1, SyncPowerStateInterval: -1,
		PowerFailureRecoveryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopConductor(t, c, 10*time.Second) })
	return c
}

func stopConductor(t *testing.T, c *conductor.Conductor, wait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c.Stop(ctx)
}

// inspectWaitNode enrolls a fake-power node with the agent inspect
// interface and brings it to inspect wait on c.
func inspectWaitNode(t *testing.T, h *harness, name string) *baremetal.Node {
	t.Helper()
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName(name), Driver: builtin.FakeHardware, InspectInterface: agentdeploy.InspectName})
	if err != nil {
		t.Fatal(err)
	}
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Inspect(h.ctx, n.UUID))
	return h.waitFor(n.UUID, statemachine.InspectWait)
}

// blockWorker occupies c's only worker with a slow verification.
func blockWorker(t *testing.T, h *harness, d time.Duration) string {
	t.Helper()
	b, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName("blocker"), Driver: builtin.FakeHardware,
		DriverInfo: map[string]any{fake.DelayKey: d.String()}})
	if err != nil {
		t.Fatal(err)
	}
	h.must(h.c.Manage(h.ctx, b.UUID))
	deadline := time.Now().Add(10 * time.Second)
	for {
		cur, _ := h.store.GetNode(h.ctx, b.UUID)
		if cur.Reservation != "" {
			return b.UUID
		}
		if time.Now().After(deadline) {
			t.Fatal("the blocker never started")
		}
		time.Sleep(time.Millisecond)
	}
}

func inspectionData(uuid string) agentclient.InspectionData {
	inv := testInventory([]string{fake.MAC(uuid)})
	raw, _ := json.Marshal(inv)
	return agentclient.InspectionData{NodeUUID: uuid, Inventory: inv, RawInventory: raw, PluginData: map[string]any{}, ReceivedAt: time.Now().UTC()}
}

// TestInspectionDataSurvivesRestart accepts inspection data on a
// conductor that stops before processing it (its only worker is busy):
// the data is the node's intent in the database, and the restarted
// conductor processes it.
func TestInspectionDataSurvivesRestart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, inspectionDataSurvivesRestart)
}

func inspectionDataSurvivesRestart(t *testing.T) {
	store := openStore(t, false)
	reg := inspectRegistry(t)
	c1 := startConductor(t, store, reg, "inspect-restart", 1)
	h := &harness{t: t, store: store, c: c1, ctx: context.Background()}
	n := inspectWaitNode(t, h, "restart")
	blockWorker(t, h, time.Second)
	ib := c1.AgentBackend().(agentclient.InspectionBackend)
	if err := ib.ContinueInspection(h.ctx, inspectionData(n.UUID)); err != nil {
		t.Fatal(err)
	}
	stopConductor(t, c1, 50*time.Millisecond)
	held, _ := store.GetNode(h.ctx, n.UUID)
	if held.ProvisionState != statemachine.InspectWait || held.DriverInternalInfo["anvil_intent"] == nil {
		t.Fatalf("after the stop: state %s intent %v, want inspect wait with the data pending", held.ProvisionState, held.DriverInternalInfo["anvil_intent"])
	}
	c2 := startConductor(t, store, reg, "inspect-restart", 4)
	defer stopConductor(t, c2, 10*time.Second)
	h.c = c2
	m := h.waitFor(n.UUID, statemachine.Manageable)
	if m.Properties["cpus"] == nil || m.Properties["local_gb"] == nil || m.InspectionFinishedAt.IsZero() {
		t.Fatalf("restarted conductor did not apply the data: properties %v finished %v", m.Properties, m.InspectionFinishedAt)
	}
	if ports, _ := store.ListPorts(h.ctx, n.UUID); len(ports) != 1 || ports[0].Address != fake.MAC(n.UUID) {
		t.Fatalf("ports %+v", ports)
	}
}

// TestInspectionDataDroppedWhenNoLongerWaiting covers the two ways data
// accepted but not yet processed is dropped: an abort before processing
// (history note, the abort wins), and a node that left inspect wait
// behind the intent's back (the intent runs, notes the drop and changes
// nothing else).
func TestInspectionDataDroppedWhenNoLongerWaiting(t *testing.T) {
	t.Parallel()
	synctest.Test(t, inspectionDataDroppedWhenNoLongerWaiting)
}

func inspectionDataDroppedWhenNoLongerWaiting(t *testing.T) {
	store := openStore(t, false)
	reg := inspectRegistry(t)
	c := startConductor(t, store, reg, fmt.Sprintf("inspect-drop-%d", time.Now().UnixNano()), 1)
	defer stopConductor(t, c, 10*time.Second)
	h := &harness{t: t, store: store, c: c, ctx: context.Background()}
	aborted := inspectWaitNode(t, h, "drop-abort")
	moved := inspectWaitNode(t, h, "drop-moved")
	blocker := blockWorker(t, h, time.Second)
	ib := c.AgentBackend().(agentclient.InspectionBackend)
	for _, n := range []*baremetal.Node{aborted, moved} {
		if err := ib.ContinueInspection(h.ctx, inspectionData(n.UUID)); err != nil {
			t.Fatal(err)
		}
	}
	h.must(c.Abort(h.ctx, aborted.UUID))
	// Another actor fails the second node while its data waits.
	cur, _ := store.GetNode(h.ctx, moved.UUID)
	cur.ProvisionState, cur.LastError = statemachine.InspectFailed, "failed elsewhere"
	if err := store.UpdateNode(h.ctx, cur, ""); err != nil {
		t.Fatal(err)
	}
	h.waitFor(blocker, statemachine.Manageable)
	a := h.waitFor(aborted.UUID, statemachine.InspectFailed)
	if a.LastError != "Inspection aborted by request" || a.Properties["cpus"] != nil {
		t.Errorf("aborted node: last error %q properties %v", a.LastError, a.Properties)
	}
	deadline := time.Now().Add(10 * time.Second)
	var m *baremetal.Node
	for {
		m, _ = store.GetNode(h.ctx, moved.UUID)
		if m.DriverInternalInfo["anvil_intent"] == nil && m.Reservation == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pending inspection data was never handled")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if m.ProvisionState != statemachine.InspectFailed || m.LastError != "failed elsewhere" || m.Properties["cpus"] != nil {
		t.Errorf("dropped data changed the node: state %s last error %q properties %v", m.ProvisionState, m.LastError, m.Properties)
	}
	ah := &agentHarness{harness: h}
	for _, uuid := range []string{aborted.UUID, moved.UUID} {
		if hist := strings.Join(ah.historyEvents(uuid), "|"); !strings.Contains(hist, "inspection data dropped") {
			t.Errorf("node %s history lacks the drop note: %s", uuid, hist)
		}
	}
}

// TestInspectWaitTimeoutSparesAcceptedData: data the ramdisk posted in
// time but still queued for processing when the inspect-wait timeout
// check runs is processed, not timed out (Ironic resumes the node to
// inspecting as it accepts the data, out of the timeout's reach).
func TestInspectWaitTimeoutSparesAcceptedData(t *testing.T) {
	t.Parallel()
	synctest.Test(t, inspectWaitTimeoutSparesAcceptedData)
}

func inspectWaitTimeoutSparesAcceptedData(t *testing.T) {
	store := openStore(t, false)
	clock := newFakeClock()
	c := startConductorClock(t, store, inspectRegistry(t), fmt.Sprintf("inspect-timeout-%d", time.Now().UnixNano()), 1, clock)
	h := &harness{t: t, store: store, c: c, ctx: context.Background()}
	n := inspectWaitNode(t, h, "timeout-queued")
	blocker := blockWorker(t, h, time.Second)
	if err := c.AgentBackend().(agentclient.InspectionBackend).ContinueInspection(h.ctx, inspectionData(n.UUID)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(31 * time.Minute)
	c.CheckTimeouts(h.ctx)
	if cur, _ := store.GetNode(h.ctx, n.UUID); cur.ProvisionState != statemachine.InspectWait {
		t.Fatalf("node with accepted data is %s after the timeout check (last error %q), want inspect wait", cur.ProvisionState, cur.LastError)
	}
	h.waitFor(blocker, statemachine.Manageable)
	m := h.waitFor(n.UUID, statemachine.Manageable)
	if m.Properties["cpus"] == nil {
		t.Fatalf("accepted data not applied: properties %v", m.Properties)
	}
}

// inventoryFaultStore is a store whose SaveNodeInventory fails while
// failSaves is set. It forwards the optional capabilities the conductor
// uses, so only the inventory save differs.
type inventoryFaultStore struct {
	baremetal.Store
	failSaves atomic.Bool
	saves     atomic.Int32
}

func (s *inventoryFaultStore) SaveNodeInventory(ctx context.Context, nodeUUID string, inv *baremetal.NodeInventory) error {
	s.saves.Add(1)
	if s.failSaves.Load() {
		return fmt.Errorf("disk quota exceeded on the inventory table")
	}
	return s.Store.SaveNodeInventory(ctx, nodeUUID, inv)
}

func (s *inventoryFaultStore) UpdateNodeRecording(ctx context.Context, n *baremetal.Node, holder string, e *baremetal.HistoryEntry) error {
	return s.Store.(baremetal.RecordingNodeStore).UpdateNodeRecording(ctx, n, holder, e)
}

func (s *inventoryFaultStore) SubscribeNodeChanges(fn func(baremetal.NodeChange)) (cancel func()) {
	return s.Store.(baremetal.NodeChangeNotifier).SubscribeNodeChanges(fn)
}

// TestInventorySaveFailureFailsInspection: when the inventory cannot be
// stored the inspection fails with a last_error naming it, the node
// powered off, and the previous inventory stays; once the store works
// again the next inspection stores its inventory, which then goes with
// the node.
func TestInventorySaveFailureFailsInspection(t *testing.T) {
	t.Parallel()
	store := &inventoryFaultStore{Store: openStore(t, false)}
	c := startConductor(t, store, inspectRegistry(t), fmt.Sprintf("inspect-inventory-%d", time.Now().UnixNano()), 2)
	h := &harness{t: t, store: store, c: c, ctx: context.Background()}
	ib := c.AgentBackend().(agentclient.InspectionBackend)

	n := inspectWaitNode(t, h, "inventory-fail")
	store.failSaves.Store(true)
	if err := ib.ContinueInspection(h.ctx, inspectionData(n.UUID)); err != nil {
		t.Fatal(err)
	}
	f := h.waitFor(n.UUID, statemachine.InspectFailed)
	if !strings.Contains(f.LastError, "Failed to store the inspection inventory of node "+n.UUID) || !strings.Contains(f.LastError, "disk quota exceeded") {
		t.Fatalf("last error %q does not name the failed inventory save", f.LastError)
	}
	if f.PowerState != driver.PowerOff || f.Reservation != "" || !f.InspectionFinishedAt.IsZero() {
		t.Fatalf("after the failed save: power %q, reservation %q, inspection_finished_at %v", f.PowerState, f.Reservation, f.InspectionFinishedAt)
	}
	if store.saves.Load() != 1 {
		t.Fatalf("inventory saves attempted = %d, want 1", store.saves.Load())
	}
	var nr *baremetal.InventoryNotRecordedError
	if _, err := c.NodeInventory(h.ctx, n.UUID); !errors.As(err, &nr) {
		t.Fatalf("inventory after the failed save = %v, want InventoryNotRecordedError", err)
	}

	store.failSaves.Store(false)
	h.must(c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(c.Inspect(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.InspectWait)
	data := inspectionData(n.UUID)
	data.PluginData = map[string]any{"root_disk": map[string]any{"name": "/dev/vda"}}
	if err := ib.ContinueInspection(h.ctx, data); err != nil {
		t.Fatal(err)
	}
	m := h.waitFor(n.UUID, statemachine.Manageable)
	if m.LastError != "" {
		t.Fatalf("last error %q after a successful inspection", m.LastError)
	}
	stored, err := c.NodeInventory(h.ctx, m.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stored.Inventory, data.RawInventory) {
		t.Fatalf("stored inventory = %s, want the raw posted %s", stored.Inventory, data.RawInventory)
	}
	// The posted plugin data, with what the validate-interfaces hook adds.
	var pd map[string]any
	if err := json.Unmarshal(stored.PluginData, &pd); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pd["root_disk"]) != fmt.Sprint(data.PluginData["root_disk"]) || pd["all_interfaces"] == nil {
		t.Fatalf("stored plugin data = %s, want the posted root_disk and all_interfaces", stored.PluginData)
	}

	h.must(c.Delete(h.ctx, n.UUID))
	var nf *baremetal.NotFoundError
	if _, err := c.NodeInventory(h.ctx, n.UUID); !errors.As(err, &nf) || nf.Kind != "node" {
		t.Fatalf("inventory of a deleted node = %v, want a node NotFoundError", err)
	}
	if _, err := store.GetNodeInventory(h.ctx, n.UUID); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("store still has the deleted node's inventory: %v", err)
	}
}

// TestInspectionRefusesNonObjectInventory fails an inspection whose
// inventory is not a JSON object before anything is written.
func TestInspectionRefusesNonObjectInventory(t *testing.T) {
	t.Parallel()
	store := &inventoryFaultStore{Store: openStore(t, false)}
	c := startConductor(t, store, inspectRegistry(t), fmt.Sprintf("inspect-badinv-%d", time.Now().UnixNano()), 2)
	h := &harness{t: t, store: store, c: c, ctx: context.Background()}
	n := inspectWaitNode(t, h, "inventory-null")
	data := inspectionData(n.UUID)
	data.RawInventory = json.RawMessage(`null`)
	if err := c.AgentBackend().(agentclient.InspectionBackend).ContinueInspection(h.ctx, data); err != nil {
		t.Fatal(err)
	}
	f := h.waitFor(n.UUID, statemachine.InspectFailed)
	if !strings.Contains(f.LastError, "invalid inventory") || !strings.Contains(f.LastError, n.UUID) {
		t.Fatalf("last error %q does not say the inventory is invalid", f.LastError)
	}
	if ports, _ := store.ListPorts(h.ctx, n.UUID); len(ports) != 0 || f.Properties["cpus"] != nil || store.saves.Load() != 0 {
		t.Fatalf("a refused inventory wrote ports %+v, properties %v or %d inventories", ports, f.Properties, store.saves.Load())
	}
	if _, err := c.NodeInventory(h.ctx, "no-such-node"); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("inventory of an unknown node = %v", err)
	}
}

// TestInventorySaveFailureFastTrackPowersOff: with fast track the
// teardown leaves the ramdisk running; a failed inventory save then
// powers the node off, as any failed inspection does.
func TestInventorySaveFailureFastTrackPowersOff(t *testing.T) {
	t.Parallel()
	store := &inventoryFaultStore{Store: openStore(t, false)}
	c := startConductor(t, store, inspectRegistry(t), fmt.Sprintf("inspect-inventory-ft-%d", time.Now().UnixNano()), 2)
	h := &harness{t: t, store: store, c: c, ctx: context.Background()}
	n, err := c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName("inventory-ft"), Driver: builtin.FakeHardware,
		InspectInterface: agentdeploy.InspectName, DriverInfo: map[string]any{"fast_track": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	h.must(c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(c.Inspect(h.ctx, n.UUID))
	if w := h.waitFor(n.UUID, statemachine.InspectWait); w.PowerState != driver.PowerOn {
		t.Fatalf("node waiting for inspection is %q, want power on", w.PowerState)
	}
	store.failSaves.Store(true)
	if err := c.AgentBackend().(agentclient.InspectionBackend).ContinueInspection(h.ctx, inspectionData(n.UUID)); err != nil {
		t.Fatal(err)
	}
	f := h.waitFor(n.UUID, statemachine.InspectFailed)
	if !strings.Contains(f.LastError, "inspection inventory") || f.PowerState != driver.PowerOff {
		t.Fatalf("fast-track node after a failed inventory save: last error %q, power %q; want the save named and power off", f.LastError, f.PowerState)
	}
	for _, k := range []string{"anvil_inspection_managed_boot", driver.InternalAgentURL, driver.InternalAgentToken} {
		if _, ok := f.DriverInternalInfo[k]; ok {
			t.Errorf("driver_internal_info keeps %s after the failed inspection", k)
		}
	}
}
