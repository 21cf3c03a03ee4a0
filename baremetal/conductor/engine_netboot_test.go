package conductor_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
	"github.com/anvilmetal/anvil/statemachine"

	"github.com/anvilmetal/anvil/netboot/netboottest"
)

// netbootPower is fake power for a machine that boots from the network:
// powered on (or rebooted) with its boot device on PXE, it finds its boot
// configuration in the config store by MAC, as it would from the boot
// server, and boots the simulated agent ramdisk when that is a ramdisk
// configuration; otherwise it boots its disk (no agent).
type netbootPower struct {
	*fake.Power
	fleet   *simfleet.Fleet
	configs *netboottest.Store
}

func (p *netbootPower) follow(t *driver.Task) error {
	state, _ := t.InternalString(fake.PowerStateKey)
	device, ok := t.InternalString(fake.BootDeviceKey)
	if !ok {
		device = string(driver.BootPXE)
	}
	if state != string(driver.PowerOn) || device != string(driver.BootPXE) {
		p.fleet.Halt(t.NodeUUID)
		return nil
	}
	var macs []string
	var cfg netboot.Config
	found := false
	for _, port := range t.Ports {
		if !port.PXEEnabled {
			continue
		}
		macs = append(macs, port.Address)
		if c, ok := p.configs.ForMAC(port.Address); ok && !found {
			cfg, found = c, true
		}
	}
	if !found || cfg.Action != netboot.Ramdisk || cfg.Node != t.NodeUUID {
		p.fleet.Halt(t.NodeUUID)
		return nil
	}
	for _, param := range cfg.Params {
		if cb, ok := strings.CutPrefix(param, simfleet.InspectionCallbackParam+"="); ok {
			return p.fleet.BootInspection(t.NodeUUID, macs, cb)
		}
	}
	return p.fleet.Boot(t.NodeUUID, macs)
}

func (p *netbootPower) SetPowerState(ctx context.Context, t *driver.Task, target driver.PowerState, timeout time.Duration) error {
	if err := p.Power.SetPowerState(ctx, t, target, timeout); err != nil {
		return err
	}
	return p.follow(t)
}

func (p *netbootPower) Reboot(ctx context.Context, t *driver.Task, timeout time.Duration) error {
	if err := p.Power.Reboot(ctx, t, timeout); err != nil {
		return err
	}
	return p.follow(t)
}

// GetPowerState reads power off once the agent powered the machine off.
func (p *netbootPower) GetPowerState(ctx context.Context, t *driver.Task) (driver.PowerState, error) {
	if a := p.fleet.Agent(t.NodeUUID); a != nil && a.IsGone() && a.CommandRuns(agentclient.CmdPowerOff) > 0 {
		t.SetDriverInternalInfo(fake.PowerStateKey, string(driver.PowerOff))
		p.fleet.Halt(t.NodeUUID)
		return driver.PowerOff, nil
	}
	return p.Power.GetPowerState(ctx, t)
}

var _ driver.PowerInterface = (*netbootPower)(nil)

// TestIPMINodeNetbootLifecycle enrolls an ipmi node with boot_interface
// ipxe (no stub boot interface registered: the network boot interfaces
// are), and takes it through manage, provide, deploy and undeploy on a
// simulated machine that boots whatever boot configuration the boot
// interface wrote for its MAC. The boot configuration must be written and
// removed at the right moments.
func TestIPMINodeNetbootLifecycle(t *testing.T) {
	t.Parallel()
	for _, boot := range []string{pxe.NameIPXE, pxe.NamePXE} {
		t.Run(boot, func(t *testing.T) {
			t.Parallel()
			netbootLifecycle(t, ipmitool.HardwareTypeDef(), ipmitool.ImplIPMITool, boot)
		})
	}
}

// TestRedfishNodeNetbootLifecycle is the same for a redfish node: ipxe is
// its default boot interface too (redfish-virtual-media comes last).
func TestRedfishNodeNetbootLifecycle(t *testing.T) {
	t.Parallel()
	netbootLifecycle(t, rfdriver.HardwareTypeDef(), rfdriver.ImplRedfish, pxe.NameIPXE)
}

// netbootLifecycle runs the lifecycle on hardware type hw, with fake BMC
// access registered under bmc, the name of hw's power and management
// implementations, and boot, the node's boot interface.
func netbootLifecycle(t *testing.T, hw driver.HardwareType, bmc, boot string) {
	store := openStore(t, false)
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	api := httptest.NewUnstartedServer(nil)
	t.Cleanup(api.Close)
	apiURL := "http://" + api.Listener.Addr().String()
	fleet, err := simfleet.New(simfleet.Config{APIURL: apiURL, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })

	configs := netboottest.NewStore()
	// Ironic's enabled_boot_interfaces lists ipxe and pxe (and
	// redfish-virtual-media) by default; the computed list would hold
	// each hardware type's first only.
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{hw.Name},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindBoot: {pxe.NameIPXE, pxe.NamePXE}}})
	reg.MustRegister(builtin.Bundle(fake.Config{}))
	// The hardware type with fake BMC access under its power and
	// management names; boot and deploy are the real implementations.
	reg.MustRegister(driver.Bundle{
		HardwareTypes: []driver.HardwareType{hw},
		Implementations: []driver.Implementation{
			{Kind: driver.KindPower, Name: bmc, Impl: &netbootPower{Power: fake.NewPower(fake.Config{}), fleet: fleet, configs: configs}},
			{Kind: driver.KindManagement, Name: bmc, Impl: fake.NewManagement(fake.Config{})},
			{Kind: driver.KindDeploy, Name: agentdeploy.Name, Impl: agentdeploy.New(client)},
		},
	})
	// pxelinux loads the ramdisk from the boot server only: local paths.
	images := pxe.Options{DeployKernel: "http://192.0.2.1:8080/ipa.kernel", DeployRamdisk: "http://192.0.2.1:8080/ipa.initramfs"}
	if boot == pxe.NamePXE {
		images = pxe.Options{DeployKernel: "/srv/anvil/ipa.kernel", DeployRamdisk: "/srv/anvil/ipa.initramfs"}
	}
	reg.MustRegister(pxe.New(configs, images).Bundle())
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "netboot-" + hw.Name, Logger: testLogger(t),
		Agent: conductor.AgentSettings{Client: client, APIURL: apiURL}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := serveAgentAPI(t, api, c)
	h := &harness{t: t, store: store, c: c, ctx: ctx}

	n, err := c.Enroll(ctx, &baremetal.Node{Name: uniqueName(hw.Name + "-" + boot), Driver: hw.Name, BootInterface: boot,
		InstanceInfo: map[string]any{"image_source": "http://images.example/ubuntu.qcow2", "image_checksum": "0123456789abcdef0123456789abcdef"}})
	h.must(err)
	if n.BootInterface != boot || n.DeployInterface != agentdeploy.Name || n.PowerInterface != bmc {
		t.Fatalf("enrolled with boot %q, deploy %q, power %q", n.BootInterface, n.DeployInterface, n.PowerInterface)
	}
	other, err := c.Enroll(ctx, &baremetal.Node{Name: uniqueName(hw.Name + "-default"), Driver: hw.Name})
	h.must(err)
	if other.BootInterface != pxe.NameIPXE {
		t.Errorf("default boot interface of a %s node = %q, want ipxe (Ironic's first)", hw.Name, other.BootInterface)
	}
	const mac = "52:54:00:6e:b0:01"
	h.must(store.CreatePort(ctx, &baremetal.Port{NodeUUID: n.UUID, Address: mac, PXEEnabled: true}))

	expectWrites := func(phase string, want ...string) {
		t.Helper()
		if got := configs.Writes(n.UUID); !slices.Equal(got, want) {
			t.Fatalf("%s: boot configuration writes %q, want %q", phase, got, want)
		}
	}
	expectNone := func(phase string) {
		t.Helper()
		if cfg, ok := configs.Config(n.UUID); ok {
			t.Fatalf("%s: boot configuration %+v left, want none", phase, cfg)
		}
	}

	h.must(c.Manage(ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	expectWrites("manageable")

	h.must(c.Provide(ctx, n.UUID))
	cleaned := h.waitFor(n.UUID, statemachine.Available)
	expectWrites("available after cleaning", "put ramdisk/clean", "delete")
	expectNone("available")
	// The boot interface set the one-time network boot itself, through
	// the management interface the conductor bound to its Task.
	if dev, _ := cleaned.DriverInternalInfo[fake.BootDeviceKey].(string); dev != string(driver.BootPXE) || cleaned.DriverInternalInfo[fake.BootPersistentKey] != false {
		t.Errorf("boot device after the cleaning boot %q (persistent %v), want a one-time pxe", dev, cleaned.DriverInternalInfo[fake.BootPersistentKey])
	}

	h.must(c.Deploy(ctx, n.UUID, conductor.DeployOptions{}))
	active := h.waitFor(n.UUID, statemachine.Active)
	expectWrites("active", "put ramdisk/clean", "delete", "put ramdisk/deploy", "put local")
	cfg, ok := configs.Config(n.UUID)
	if !ok || cfg.Action != netboot.LocalDisk || cfg.Interface != netboot.Interface(boot) || cfg.Mode != netboot.UEFI || !slices.Equal(cfg.MACs, []string{mac}) {
		t.Fatalf("active node's boot configuration %+v, want a local boot for %s", cfg, mac)
	}
	if dev, _ := active.DriverInternalInfo[fake.BootDeviceKey].(string); dev != string(driver.BootDisk) {
		t.Errorf("active node's boot device %q, want disk", dev)
	}

	h.must(c.Undeploy(ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	expectWrites("available after undeploy", "put ramdisk/clean", "delete", "put ramdisk/deploy", "put local", "delete", "put ramdisk/clean", "delete")
	expectNone("available after undeploy")
	if boots := fleet.Boots(n.UUID); boots != 3 {
		t.Errorf("ramdisk boots = %d, want 3 (clean, deploy, clean)", boots)
	}

	// Each ramdisk boot is one attempt in the history: prepared, the
	// agent's lookup, its first heartbeat (and not every heartbeat).
	hist, err := store.ListHistory(ctx, n.UUID, 0)
	h.must(err)
	count := map[string]int{}
	for _, e := range hist {
		if e.EventType == stage.EventType {
			count[e.Event]++
		}
	}
	if count[string(stage.Prepared)] != 3 || count[string(stage.AgentHeartbeat)] != 3 || count[string(stage.AgentLookup)] < 3 {
		t.Errorf("boot stages in history %v, want 3 prepared, 3 first heartbeats, at least 3 lookups", count)
	}
}
