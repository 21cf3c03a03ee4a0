package pxe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/drivertest"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/netboot/netboottest"
	"github.com/anvilmetal/anvil/statemachine"
)

var update = flag.Bool("update", false, "rewrite testdata/configs.golden.json from the current code")

const nodeUUID = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"

func newTask(state statemachine.State) *driver.Task {
	return &driver.Task{
		NodeUUID: nodeUUID, NodeName: "rack1-u07", HardwareType: "ipmi", ProvisionState: state,
		Interfaces: map[driver.Kind]string{driver.KindDeploy: "direct"},
		DriverInfo: map[string]any{
			"deploy_kernel":  "/srv/anvil/ipa.kernel",
			"deploy_ramdisk": "/srv/anvil/ipa.initramfs",
			"rescue_kernel":  "/srv/images/rescue.kernel",
			"rescue_ramdisk": "/srv/images/rescue.initramfs",
		},
		Ports: []driver.Port{
			{UUID: "p1", Address: "52:54:00:AA:BB:01", PXEEnabled: true},
			{UUID: "p2", Address: "52:54:00:aa:bb:02", PXEEnabled: false},
			{UUID: "p3", Address: "52:54:00:aa:bb:03", PXEEnabled: true},
		},
	}
}

func options() pxe.Options { return pxe.Options{IPXETimeout: 30 * time.Second} }

func pick(x *pxe.Interfaces, name string) *pxe.Boot {
	switch name {
	case pxe.NamePXE:
		return x.PXE()
	case pxe.NameIPXE:
		return x.IPXE()
	case pxe.NameHTTP:
		return x.HTTP()
	}
	return x.HTTPIPXE()
}

// goldenCase is one row of testdata/configs.golden.json: what a call
// wrote and the boot device it set.
type goldenCase struct {
	Name       string          `json:"name"`
	Config     *netboot.Config `json:"config"`
	BootDevice string          `json:"boot_device,omitempty"`
	Persistent bool            `json:"persistent,omitempty"`
}

func TestConfigsWrittenGolden(t *testing.T) {
	params := map[string]any{"ipa-inspection-callback-url": "http://192.0.2.1:6385/v1/continue_inspection", "ipa-api-url": "http://192.0.2.1:6385"}
	type row struct {
		name    string
		impl    string
		state   statemachine.State
		mode    string // properties capabilities boot_mode
		call    string // "ramdisk" or "instance"
		deploy  string
		devices []driver.BootDevice
		adjust  func(*driver.Task)
	}
	all := []driver.BootDevice{driver.BootPXE, driver.BootDisk, driver.BootUEFIHTTP}
	var rows []row
	for _, impl := range []string{pxe.NamePXE, pxe.NameIPXE, pxe.NameHTTP, pxe.NameHTTPIPXE} {
		for _, mode := range []string{"bios", "uefi"} {
			if mode == "bios" && (impl == pxe.NameHTTP || impl == pxe.NameHTTPIPXE) {
				continue
			}
			rows = append(rows, row{name: impl + "/" + mode + "/deploying", impl: impl, state: statemachine.Deploying, mode: mode, call: "ramdisk", devices: all})
		}
	}
	for _, st := range []statemachine.State{statemachine.Cleaning, statemachine.InspectWait, statemachine.Rescuing, statemachine.ServiceWait} {
		rows = append(rows, row{name: "ipxe/uefi/" + string(st), impl: pxe.NameIPXE, state: st, call: "ramdisk", devices: all})
	}
	rows = append(rows,
		row{name: "http-ipxe without UEFI HTTP boot device falls back to pxe", impl: pxe.NameHTTPIPXE, state: statemachine.Deploying, call: "ramdisk",
			devices: []driver.BootDevice{driver.BootPXE, driver.BootDisk}},
		row{name: "ipxe instance params override driver_info, with %default%", impl: pxe.NameIPXE, state: statemachine.Cleaning, call: "ramdisk", devices: all,
			adjust: func(t *driver.Task) {
				t.DriverInfo["kernel_append_params"] = "console=ttyS0"
				t.InstanceInfo = map[string]any{"kernel_append_params": "%default% console=ttyS1,115200n8"}
			}},
		row{name: "ipxe driver_info params, persistent always", impl: pxe.NameIPXE, state: statemachine.Cleaning, call: "ramdisk", devices: all,
			adjust: func(t *driver.Task) {
				t.DriverInfo["kernel_append_params"] = "console=ttyS0 ipa-debug=1"
				t.DriverInfo["force_persistent_boot_device"] = "Always"
			}},
		row{name: "ipxe local boot after deploy", impl: pxe.NameIPXE, state: statemachine.Deploying, call: "instance", devices: all},
		row{name: "pxe ramdisk deploy instance", impl: pxe.NamePXE, state: statemachine.Deploying, call: "instance", deploy: pxe.RamdiskDeploy, mode: "bios", devices: all,
			adjust: func(t *driver.Task) {
				t.InstanceInfo = map[string]any{"kernel": "/srv/anvil/app.kernel", "ramdisk": "/srv/anvil/app.initramfs", "kernel_append_params": "quiet"}
			}},
	)
	var got []goldenCase
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			store := netboottest.NewStore()
			x := pxe.New(store, options())
			b := pick(x, r.impl)
			task := newTask(r.state)
			if r.mode != "" {
				task.Properties = map[string]any{"capabilities": "cpu_vt:true,boot_mode:" + r.mode}
			}
			if r.deploy != "" {
				task.Interfaces[driver.KindDeploy] = r.deploy
			}
			if r.adjust != nil {
				r.adjust(task)
			}
			m := &recordingManagement{supported: r.devices}
			bind(task, r.impl, b, m)
			ctx := context.Background()
			if err := b.Validate(ctx, task); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			var err error
			if r.call == "ramdisk" {
				err = b.PrepareRamdisk(ctx, task, params)
			} else {
				err = b.PrepareInstance(ctx, task)
			}
			if err != nil {
				t.Fatal(err)
			}
			c, ok := store.Config(nodeUUID)
			if !ok {
				t.Fatal("no configuration written")
			}
			if c.Interface != netboot.Interface(b.NetworkBoot()) {
				t.Errorf("Interface = %q, want %q", c.Interface, b.NetworkBoot())
			}
			gc := goldenCase{Name: r.name, Config: &c}
			if call, n := m.last(); n > 0 {
				if n != 1 {
					t.Errorf("SetBootDevice called %d times, want once", n)
				}
				gc.BootDevice, gc.Persistent = string(call.Device), call.Persistent
			}
			got = append(got, gc)
		})
	}
	data, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, '\n')
	path := filepath.Join("testdata", "configs.golden.json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(data, want) {
		t.Errorf("configurations differ from %s (run go test -update and review the diff):\n%s", path, data)
	}
}

func TestLifecycleKeepsLocalBootAfterAgentTearDown(t *testing.T) {
	ctx := context.Background()
	store := netboottest.NewStore()
	b := pxe.New(store, options()).IPXE()
	task := newTask(statemachine.Deploying)
	bind(task, pxe.NameIPXE, b, &recordingManagement{supported: []driver.BootDevice{driver.BootPXE}})
	step := func(what string, fn func() error, want netboot.Action) {
		t.Helper()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		c, ok := store.Config(nodeUUID)
		switch {
		case want == "" && ok:
			t.Fatalf("after %s: configuration %+v left, want none", what, c)
		case want != "" && !ok:
			t.Fatalf("after %s: no configuration, want %s", what, want)
		case want != "" && c.Action != want:
			t.Fatalf("after %s: action %s, want %s", what, c.Action, want)
		}
	}
	step("prepare ramdisk", func() error { return b.PrepareRamdisk(ctx, task, nil) }, netboot.Ramdisk)
	step("prepare instance", func() error { return b.PrepareInstance(ctx, task) }, netboot.LocalDisk)
	// The conductor's tear_down_agent cleans up the ramdisk after
	// prepare_instance_boot: the local boot stays.
	step("clean up ramdisk after the instance", func() error { return b.CleanUpRamdisk(ctx, task) }, netboot.LocalDisk)
	task.ProvisionState = statemachine.Deleting
	step("clean up instance", func() error { return b.CleanUpInstance(ctx, task) }, "")
	task.ProvisionState = statemachine.Cleaning
	step("prepare ramdisk for cleaning", func() error { return b.PrepareRamdisk(ctx, task, nil) }, netboot.Ramdisk)
	step("clean up instance keeps the ramdisk", func() error { return b.CleanUpInstance(ctx, task) }, netboot.Ramdisk)
	step("clean up ramdisk", func() error { return b.CleanUpRamdisk(ctx, task) }, "")
	step("clean up ramdisk again", func() error { return b.CleanUpRamdisk(ctx, task) }, "")
}

func TestPrepareRamdiskNeedsABoundDriver(t *testing.T) {
	store := netboottest.NewStore()
	b := pxe.New(store, options()).PXE()
	err := b.PrepareRamdisk(context.Background(), newTask(statemachine.Cleaning), nil)
	if err == nil {
		t.Fatal("PrepareRamdisk without a bound driver succeeded; it cannot set the boot device")
	}
}

func TestConformance(t *testing.T) {
	x := pxe.New(netboottest.NewStore(), options())
	for _, b := range []*pxe.Boot{x.PXE(), x.IPXE(), x.HTTP(), x.HTTPIPXE()} {
		t.Run(b.Name(), func(t *testing.T) {
			drivertest.Run(t, drivertest.Config{Kind: driver.KindBoot, Name: b.Name(), Impl: b,
				NewTask: func() *driver.Task { return newTask(statemachine.Manageable) }})
		})
	}
}

func TestBundleListsFourBootInterfaces(t *testing.T) {
	bundle := pxe.New(netboottest.NewStore(), options()).Bundle()
	if len(bundle.HardwareTypes) != 0 {
		t.Errorf("Bundle has hardware types %v, want none", bundle.HardwareTypes)
	}
	var names []string
	for _, i := range bundle.Implementations {
		if i.Kind != driver.KindBoot {
			t.Errorf("%s has kind %s", i.Name, i.Kind)
		}
		names = append(names, i.Name)
	}
	want := []string{"ipxe", "pxe", "http-ipxe", "http"}
	if len(names) != len(want) {
		t.Fatalf("names %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("names %v, want %v", names, want)
		}
	}
}

var _ driver.BootInterface = (*pxe.Boot)(nil)

// TestSecureBootConfig: on pxe, a node asking for secure boot gets a UEFI
// SecureBoot configuration (Debian's signed shim and GRUB); without the
// capability, none.
func TestSecureBootConfig(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		caps string
		want bool
	}{{"secure_boot:true", true}, {"boot_mode:uefi,secure_boot:false", false}, {"boot_mode:uefi", false}} {
		store := netboottest.NewStore()
		b := pxe.New(store, options()).PXE()
		task := newTask(statemachine.Deploying)
		task.Properties = map[string]any{"capabilities": tc.caps}
		bind(task, pxe.NamePXE, b, &recordingManagement{supported: []driver.BootDevice{driver.BootPXE}})
		if err := b.PrepareRamdisk(ctx, task, nil); err != nil {
			t.Fatalf("%s: %v", tc.caps, err)
		}
		c, ok := store.Config(nodeUUID)
		if !ok || c.SecureBoot != tc.want || c.Mode != netboot.UEFI {
			t.Errorf("capabilities %q: configuration %+v (found %v), want secure boot %v in uefi mode", tc.caps, c, ok, tc.want)
		}
	}
}
