package agentdeploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
)

const gib = int64(1) << 30

// inventory is a two-NIC machine: eth0 (PXE, with an address) and eth1.
func inventory() agentclient.Inventory {
	return agentclient.Inventory{
		Interfaces: []agentclient.InventoryInterface{
			{Name: "eth0", MACAddress: "52:54:00:AA:00:01", IPv4Address: "192.0.2.10", HasCarrier: true},
			{Name: "eth1", MACAddress: "52:54:00:aa:00:02", HasCarrier: true},
		},
		CPU:    agentclient.InventoryCPU{Count: 8, Architecture: "x86_64"},
		Memory: agentclient.InventoryMemory{Total: 16 * gib, PhysicalMB: 16384},
		Disks: []agentclient.InventoryDisk{
			{Name: "/dev/sda", Size: 480_000_000_000, Rotational: false, Serial: "SSD1", WWN: "0x5000c500a1"},
			{Name: "/dev/sdb", Size: 2_000_000_000_000, Rotational: true, Serial: "HDD1", WWN: "0x5000c500b2"},
			{Name: "/dev/sdc", Size: 2 * gib, Serial: "TINY"},
		},
		Boot: &agentclient.BootInfo{PXEInterface: "52:54:00:aa:00:01"},
	}
}

func raw(t *testing.T, inv agentclient.Inventory) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newInspect(t *testing.T, o agentdeploy.InspectOptions) *agentdeploy.Inspect {
	t.Helper()
	in, err := agentdeploy.NewInspect(o)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func portMACs(ps []driver.Port) map[string]bool {
	out := map[string]bool{}
	for _, p := range ps {
		out[p.Address] = p.PXEEnabled
	}
	return out
}

func TestNewInspectOptions(t *testing.T) {
	if got := newInspect(t, agentdeploy.InspectOptions{}).Hooks(); strings.Join(got, ",") != "ramdisk-error,validate-interfaces,ports,architecture,memory,cpus,root-device" {
		t.Errorf("default hooks = %v", got)
	}
	if got := agentdeploy.IronicDefaultHooks(); strings.Join(got, ",") != "ramdisk-error,validate-interfaces,ports,architecture" {
		t.Errorf("Ironic default hooks = %v", got)
	}
	for _, tc := range []struct {
		name  string
		o     agentdeploy.InspectOptions
		field string
	}{
		{"unknown hook", agentdeploy.InspectOptions{Hooks: []string{"ramdisk-error", "pci-devices"}}, "Hooks"},
		{"repeated hook", agentdeploy.InspectOptions{Hooks: []string{"memory", "memory"}}, "Hooks"},
		{"ports before validate", agentdeploy.InspectOptions{Hooks: []string{"ports", "validate-interfaces"}}, "Hooks"},
		{"bad add_ports", agentdeploy.InspectOptions{AddPorts: "some"}, "AddPorts"},
		{"bad keep_ports", agentdeploy.InspectOptions{KeepPorts: "none"}, "KeepPorts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agentdeploy.NewInspect(tc.o)
			var oe *agentdeploy.OptionError
			if !errors.As(err, &oe) || oe.Field != tc.field || !errors.Is(err, driver.ErrInvalidParameter) {
				t.Fatalf("NewInspect = %v, want an *OptionError on %s", err, tc.field)
			}
		})
	}
}

func TestInspectHardwareAsksForRamdiskBoot(t *testing.T) {
	in := newInspect(t, agentdeploy.InspectOptions{})
	task := &driver.Task{NodeUUID: "n1"}
	res, err := in.InspectHardware(context.Background(), task)
	if err != nil || !res.Wait || !res.RebootRequested {
		t.Fatalf("InspectHardware = %+v, %v; want Wait and RebootRequested", res, err)
	}
	if v, _ := task.DriverInternalInfo[agentdeploy.InspectionBootKey].(bool); !v {
		t.Errorf("driver_internal_info %v lacks the inspection boot flag", task.DriverInternalInfo)
	}
	if err := in.ContinueInspection(context.Background(), task, driver.InspectionData{Inventory: raw(t, inventory())}); err != nil {
		t.Fatal(err)
	}
	if _, ok := task.DriverInternalInfo[agentdeploy.InspectionBootKey]; ok {
		t.Errorf("the inspection boot flag survived ContinueInspection")
	}
}

func TestInspectionHooks(t *testing.T) {
	type want struct {
		props map[string]any // expected properties (only these keys checked)
		ports map[string]bool
		err   string // substring of the error; "" for success
		hook  string
	}
	for _, tc := range []struct {
		name  string
		o     agentdeploy.InspectOptions
		inv   func(*agentclient.Inventory)
		plug  map[string]any
		task  func(*driver.Task)
		want  want
		noInv bool
	}{
		{name: "defaults fill every property and the PXE port",
			want: want{props: map[string]any{"cpu_arch": "x86_64", "cpus": 8.0, "memory_mb": 16384.0, "local_gb": 446.0},
				ports: map[string]bool{"52:54:00:aa:00:01": true}}},
		{name: "Ironic default hooks leave memory, cpus and local_gb alone",
			o:    agentdeploy.InspectOptions{Hooks: agentdeploy.IronicDefaultHooks()},
			want: want{props: map[string]any{"cpu_arch": "x86_64", "cpus": nil, "memory_mb": nil, "local_gb": nil}, ports: map[string]bool{"52:54:00:aa:00:01": true}}},
		{name: "ramdisk error fails", plug: map[string]any{"error": "disk enumeration failed"},
			want: want{err: "Ramdisk reported error: disk enumeration failed", hook: "ramdisk-error"}},
		{name: "empty ramdisk error is no error", plug: map[string]any{"error": ""},
			want: want{props: map[string]any{"cpus": 8.0}}},
		{name: "boot_interface in plugin data (PXE form) picks the PXE port",
			plug: map[string]any{"boot_interface": "01-52-54-00-aa-00-02"},
			want: want{ports: map[string]bool{"52:54:00:aa:00:02": true}}},
		{name: "pxe_interface given by name",
			inv:  func(i *agentclient.Inventory) { i.Boot.PXEInterface = "eth1" },
			want: want{ports: map[string]bool{"52:54:00:aa:00:02": true}}},
		{name: "unknown PXE interface falls back to every valid interface",
			inv:  func(i *agentclient.Inventory) { i.Boot = nil },
			want: want{ports: map[string]bool{"52:54:00:aa:00:01": true, "52:54:00:aa:00:02": true}}},
		{name: "add_ports active keeps interfaces with an IP",
			o:    agentdeploy.InspectOptions{AddPorts: "active"},
			want: want{ports: map[string]bool{"52:54:00:aa:00:01": true}}},
		{name: "add_ports all keeps every valid interface, pxe_enabled only on the PXE one",
			o: agentdeploy.InspectOptions{AddPorts: "all"},
			inv: func(i *agentclient.Inventory) {
				i.Interfaces = append(i.Interfaces, agentclient.InventoryInterface{Name: "bad", MACAddress: "not-a-mac"},
					agentclient.InventoryInterface{Name: "zero", MACAddress: "00:00:00:00:00:00"})
			},
			want: want{ports: map[string]bool{"52:54:00:aa:00:01": true, "52:54:00:aa:00:02": false}}},
		{name: "no valid interface fails",
			inv: func(i *agentclient.Inventory) {
				i.Interfaces = []agentclient.InventoryInterface{{Name: "lo", MACAddress: ""}}
			},
			want: want{err: "no interface with a valid MAC", hook: "validate-interfaces"}},
		{name: "no interfaces at all fails",
			inv:  func(i *agentclient.Inventory) { i.Interfaces = nil },
			want: want{err: "no interfaces supplied", hook: "validate-interfaces"}},
		{name: "existing port is not duplicated (case-insensitive)",
			task: func(t *driver.Task) {
				t.Ports = []driver.Port{{UUID: "p1", Address: "52:54:00:AA:00:01", PXEEnabled: true}}
			},
			want: want{ports: map[string]bool{"52:54:00:AA:00:01": true}}},
		{name: "keep_ports all keeps a port the inventory lacks",
			task: func(t *driver.Task) { t.Ports = []driver.Port{{UUID: "p9", Address: "52:54:00:ff:ff:ff"}} },
			want: want{ports: map[string]bool{"52:54:00:ff:ff:ff": false, "52:54:00:aa:00:01": true}}},
		{name: "keep_ports present drops ports the inventory lacks",
			o: agentdeploy.InspectOptions{KeepPorts: "present"},
			task: func(t *driver.Task) {
				t.Ports = []driver.Port{{UUID: "p9", Address: "52:54:00:ff:ff:ff"}, {UUID: "p2", Address: "52:54:00:aa:00:02"}}
			},
			want: want{ports: map[string]bool{"52:54:00:aa:00:02": false, "52:54:00:aa:00:01": true}}},
		{name: "keep_ports added keeps only the kept interfaces' ports",
			o: agentdeploy.InspectOptions{KeepPorts: "added"},
			task: func(t *driver.Task) {
				t.Ports = []driver.Port{{UUID: "p9", Address: "52:54:00:ff:ff:ff"}, {UUID: "p2", Address: "52:54:00:aa:00:02"}}
			},
			want: want{ports: map[string]bool{"52:54:00:aa:00:01": true}}},
		{name: "memory from total bytes when physical_mb is missing",
			inv:  func(i *agentclient.Inventory) { i.Memory = agentclient.InventoryMemory{Total: 8 * gib} },
			want: want{props: map[string]any{"memory_mb": 8192.0}}},
		{name: "no memory fails",
			inv:  func(i *agentclient.Inventory) { i.Memory = agentclient.InventoryMemory{} },
			want: want{err: "no memory information", hook: "memory"}},
		{name: "no cpu count fails",
			inv:  func(i *agentclient.Inventory) { i.CPU.Count = 0 },
			want: want{err: "no CPU count", hook: "cpus"}},
		{name: "missing architecture leaves cpu_arch unset",
			inv:  func(i *agentclient.Inventory) { i.CPU.Architecture = "" },
			want: want{props: map[string]any{"cpu_arch": nil, "cpus": 8.0}}},
		{name: "root device hint by name",
			task: func(t *driver.Task) { t.Properties = map[string]any{"root_device": map[string]any{"name": "sdb"}} },
			want: want{props: map[string]any{"local_gb": 1861.0}}},
		{name: "root device hint by size operator and rotational",
			task: func(t *driver.Task) {
				t.Properties = map[string]any{"root_device": map[string]any{"size": ">= 100", "rotational": "true"}}
			},
			want: want{props: map[string]any{"local_gb": 1861.0}}},
		{name: "root device hint by serial and wwn",
			task: func(t *driver.Task) {
				t.Properties = map[string]any{"root_device": map[string]any{"serial": "ssd1", "wwn": "0x5000C500A1"}}
			},
			want: want{props: map[string]any{"local_gb": 446.0}}},
		{name: "root device hint by exact size",
			task: func(t *driver.Task) { t.Properties = map[string]any{"root_device": map[string]any{"size": 447.0}} },
			want: want{props: map[string]any{"local_gb": 446.0}}},
		{name: "hints matching nothing give local_gb 0",
			task: func(t *driver.Task) { t.Properties = map[string]any{"root_device": map[string]any{"serial": "NOPE"}} },
			want: want{props: map[string]any{"local_gb": 0.0}}},
		{name: "no disk of 4 GiB gives local_gb 0",
			inv: func(i *agentclient.Inventory) {
				i.Disks = []agentclient.InventoryDisk{{Name: "/dev/sda", Size: 3 * gib}}
			},
			want: want{props: map[string]any{"local_gb": 0.0}}},
		{name: "unsupported root device hint is a typed error",
			task: func(t *driver.Task) {
				t.Properties = map[string]any{"root_device": map[string]any{"wwn_vendor_extension": "0x1"}}
			},
			want: want{err: "wwn_vendor_extension", hook: "root-device"}},
		{name: "inventory that is not JSON fails", noInv: true,
			want: want{err: "not a valid IPA inventory", hook: "inventory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newInspect(t, tc.o)
			inv := inventory()
			if tc.inv != nil {
				tc.inv(&inv)
			}
			task := &driver.Task{NodeUUID: "node-1"}
			if tc.task != nil {
				tc.task(task)
			}
			data := driver.InspectionData{Inventory: raw(t, inv), PluginData: tc.plug}
			if tc.noInv {
				data.Inventory = json.RawMessage(`{"interfaces": "eth0"}`)
			}
			err := in.ContinueInspection(context.Background(), task, data)
			if tc.want.err != "" {
				var he *agentdeploy.HookError
				if !errors.As(err, &he) || he.Hook != tc.want.hook || !strings.Contains(err.Error(), tc.want.err) || he.Node != "node-1" {
					t.Fatalf("error = %v, want a *HookError of hook %s containing %q", err, tc.want.hook, tc.want.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want.props {
				got, ok := task.Properties[k]
				if v == nil {
					if ok {
						t.Errorf("properties[%s] = %v, want unset", k, got)
					}
					continue
				}
				if got != v {
					t.Errorf("properties[%s] = %v (%T), want %v", k, got, got, v)
				}
			}
			if tc.want.ports != nil {
				got := portMACs(task.Ports)
				if len(got) != len(tc.want.ports) {
					t.Fatalf("ports = %v, want %v", got, tc.want.ports)
				}
				for mac, pxe := range tc.want.ports {
					if g, ok := got[mac]; !ok || g != pxe {
						t.Errorf("port %s pxe_enabled = %v (present %t), want %v; ports %v", mac, g, ok, pxe, got)
					}
				}
			}
		})
	}
}

func TestInspectValidateChecksRootDeviceHints(t *testing.T) {
	in := newInspect(t, agentdeploy.InspectOptions{})
	task := &driver.Task{NodeUUID: "n1", Properties: map[string]any{"root_device": "sda"}}
	err := in.Validate(context.Background(), task)
	var ip *driver.InvalidParameterError
	if !errors.As(err, &ip) || ip.Node != "n1" || ip.Field != "properties" || ip.Key != "root_device" {
		t.Fatalf("Validate = %v, want an *InvalidParameterError on properties[root_device]", err)
	}
	task.Properties["root_device"] = map[string]any{"size": "big"}
	if err := in.Validate(context.Background(), task); !errors.Is(err, driver.ErrInvalidParameter) || !strings.Contains(err.Error(), "root_device.size") {
		t.Fatalf("Validate = %v, want an invalid root_device.size", err)
	}
	task.Properties["root_device"] = map[string]any{"size": 100.0}
	if err := in.Validate(context.Background(), task); err != nil {
		t.Fatalf("Validate with a valid hint = %v", err)
	}
	// Without the root-device hook the hints are not the interface's
	// business.
	in2 := newInspect(t, agentdeploy.InspectOptions{Hooks: agentdeploy.IronicDefaultHooks()})
	task.Properties["root_device"] = "sda"
	if err := in2.Validate(context.Background(), task); err != nil {
		t.Fatalf("Validate without root-device hook = %v", err)
	}
}

func TestInspectRegisters(t *testing.T) {
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces:    map[driver.Kind][]string{driver.KindInspect: {agentdeploy.InspectName, fake.Name}},
	})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindInspect, agentdeploy.InspectName, newInspect(t, agentdeploy.InspectOptions{})); err != nil {
		t.Fatal(err)
	}
	d, err := reg.Resolve(driver.NodeInterfaces{Node: "n1", HardwareType: builtin.FakeHardware,
		Interfaces: map[driver.Kind]string{driver.KindInspect: agentdeploy.InspectName}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Inspect().(driver.InbandInspector); !ok {
		t.Fatalf("resolved inspect interface %T is not an InbandInspector", d.Inspect())
	}
}
