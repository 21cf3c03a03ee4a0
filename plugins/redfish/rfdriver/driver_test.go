package rfdriver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
	"github.com/anvilmetal/anvil/steps"
)

func newDrivers(t *testing.T) *Drivers {
	t.Helper()
	d := NewDrivers(Options{Sleep: noSleep, PollInterval: time.Millisecond})
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

func task(s *redfishtest.Server, extra map[string]any) *driver.Task {
	di := map[string]any{"redfish_address": s.URL(), "redfish_username": "admin", "redfish_password": "password",
		"redfish_deploy_iso": "http://images.example/ipa.iso"}
	for k, v := range extra {
		di[k] = v
	}
	return &driver.Task{NodeUUID: "node-1", HardwareType: HardwareType, DriverInfo: di}
}

func TestValidateTypedErrors(t *testing.T) {
	d := newDrivers(t)
	ctx := context.Background()
	var mp *driver.MissingParameterError
	if err := d.Power().Validate(ctx, &driver.Task{NodeUUID: "n"}); !errors.As(err, &mp) || mp.Missing[0] != "redfish_address" || mp.Kind != driver.KindPower {
		t.Fatalf("want MissingParameterError, got %v", err)
	}
	var ip *driver.InvalidParameterError
	err := d.Management().Validate(ctx, &driver.Task{NodeUUID: "n", DriverInfo: map[string]any{"redfish_address": "bmc", "redfish_auth_type": "x", "redfish_username": "u", "redfish_password": "s3cr3t"}})
	if !errors.As(err, &ip) || ip.Key != "redfish_auth_type" || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("want InvalidParameterError, got %v", err)
	}
	err = d.VirtualMediaBoot().Validate(ctx, &driver.Task{NodeUUID: "n", DriverInfo: map[string]any{"redfish_address": "bmc"}})
	if !errors.As(err, &mp) || mp.Missing[0] != "redfish_deploy_iso" {
		t.Fatalf("want missing deploy ISO, got %v", err)
	}
}

func TestPowerManagementBoot(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	d := newDrivers(t)
	ctx := context.Background()
	tk := task(s, nil)
	p := d.Power()
	if st, err := p.GetPowerState(ctx, tk); err != nil || st != driver.PowerOff {
		t.Fatalf("%q %v", st, err)
	}
	for _, tc := range []struct {
		target driver.PowerState
		want   driver.PowerState
		reset  string
	}{
		{driver.PowerOn, driver.PowerOn, "On"},
		{driver.Reboot, driver.PowerOn, "ForceRestart"},
		{driver.SoftReboot, driver.PowerOn, "GracefulRestart"},
		{driver.SoftPowerOff, driver.PowerOff, "GracefulShutdown"},
		{driver.Reboot, driver.PowerOn, "On"}, // a reboot of an off node powers it on
		{driver.PowerOff, driver.PowerOff, "ForceOff"},
	} {
		if err := p.SetPowerState(ctx, tk, tc.target, 0); err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		if st, _ := p.GetPowerState(ctx, tk); st != tc.want {
			t.Fatalf("%s: state %s", tc.target, st)
		}
		if r := s.Stats().Resets; r[len(r)-1] != tc.reset {
			t.Fatalf("%s: used %s, want %s", tc.target, r[len(r)-1], tc.reset)
		}
	}
	m := d.Management()
	devs, err := m.SupportedBootDevices(ctx, tk)
	if err != nil || !slices.Contains(devs, driver.BootCDROM) || slices.Contains(devs, driver.BootUEFIHTTP) {
		t.Fatalf("devices %v %v", devs, err)
	}
	if err := m.SetBootDevice(ctx, tk, driver.BootPXE, true); err != nil {
		t.Fatal(err)
	}
	if bd, err := m.GetBootDevice(ctx, tk); err != nil || bd.Device != driver.BootPXE || bd.Persistent == nil || !*bd.Persistent {
		t.Fatalf("%+v %v", bd, err)
	}
	if err := m.SetBootMode(ctx, tk, driver.BootModeBIOS); err != nil {
		t.Fatal(err)
	}
	if bm, err := m.GetBootMode(ctx, tk); err != nil || bm != driver.BootModeBIOS {
		t.Fatalf("%q %v", bm, err)
	}
	if err := m.InjectNMI(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if err := m.SetSecureBoot(ctx, tk, true); err != nil {
		t.Fatal(err)
	}
	if on, err := m.GetSecureBoot(ctx, tk); err != nil || !on {
		t.Fatalf("secure boot %v %v", on, err)
	}
	if err := m.SetIndicator(ctx, tk, "Lit"); err != nil {
		t.Fatal(err)
	}
	if v, _ := m.GetIndicator(ctx, tk); v != "Lit" {
		t.Fatalf("indicator %q", v)
	}

	// Virtual media boot: insert, one-time CD, power on boots from CD.
	b := d.VirtualMediaBoot()
	if err := b.PrepareRamdisk(ctx, tk, nil); err != nil {
		t.Fatal(err)
	}
	cd := s.Resource("/redfish/v1/Systems/" + redfishtest.SystemID + "/VirtualMedia/CD1")
	if cd["Inserted"] != true || cd["Image"] != "http://images.example/ipa.iso" {
		t.Fatalf("CD %v", cd)
	}
	if err := p.SetPowerState(ctx, tk, driver.PowerOn, 0); err != nil {
		t.Fatal(err)
	}
	if boots := s.Stats().Boots; boots[len(boots)-1] != "Cd" {
		t.Fatalf("node booted from %v", boots)
	}
	if err := b.PrepareInstance(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if cd := s.Resource("/redfish/v1/Systems/" + redfishtest.SystemID + "/VirtualMedia/CD1"); cd["Inserted"] != false {
		t.Fatalf("CD still inserted: %v", cd)
	}
	if bd, _ := m.GetBootDevice(ctx, tk); bd.Device != driver.BootDisk || !*bd.Persistent {
		t.Fatalf("instance boot %+v", bd)
	}
	if _, ok := tk.Changes().DriverInternalInfo["redfish_vmedia_inserted"]; ok {
		t.Fatal("vmedia flag not cleared")
	}
}

func TestInspectHardware(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	d := newDrivers(t)
	tk := task(s, nil)
	if _, err := d.Inspect().InspectHardware(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	c := tk.Changes()
	if c.Properties["memory_mb"] != "98304" || c.Properties["cpu_arch"] != "x86_64" || c.Properties["capabilities"] != "boot_mode:uefi" || c.Properties["local_gb"] == "0" {
		t.Fatalf("properties %v", c.Properties)
	}
	if !c.PortsChanged || len(c.Ports) < 2 || c.Ports[0].Address != strings.ToLower(c.Ports[0].Address) {
		t.Fatalf("ports %+v", c.Ports)
	}
	// Missing essential property: typed failure, and no property or port
	// is written (a failed inspection changes nothing).
	s.Mutate("/redfish/v1/Systems/"+redfishtest.SystemID, func(m map[string]any) { delete(m, "MemorySummary") })
	tk2 := task(s, nil)
	_, err := d.Inspect().InspectHardware(context.Background(), tk2)
	if ch := tk2.Changes(); !errors.Is(err, ErrInspection) || ch.Properties != nil || ch.PortsChanged {
		t.Fatalf("want ErrInspection and no properties or ports, got %v, %+v", err, ch)
	}
}

func TestSteps(t *testing.T) {
	s := newServer(t, redfishtest.Options{TaskPolls: 2})
	d := newDrivers(t)
	ctx := context.Background()
	tk := task(s, nil)
	drv, err := driver.NewDriver(HardwareType, map[driver.Kind]driver.Implementation{
		driver.KindBIOS:     {Name: ImplRedfish, Impl: d.BIOS()},
		driver.KindRAID:     {Name: ImplRedfish, Impl: d.RAID()},
		driver.KindFirmware: {Name: ImplRedfish, Impl: d.Firmware()},
	})
	if err != nil {
		t.Fatal(err)
	}
	clean := drv.Steps(steps.Clean)
	var names []string
	for _, st := range clean {
		names = append(names, st.Interface+"."+st.Name)
		if st.Priority != 0 || st.RequiresRamdisk {
			t.Fatalf("out-of-band step %+v must be priority 0 without ramdisk", st)
		}
	}
	slices.Sort(names)
	if want := []string{"bios.apply_configuration", "bios.factory_reset", "firmware.update", "raid.create_configuration", "raid.delete_configuration"}; !slices.Equal(names, want) {
		t.Fatalf("clean steps %v", names)
	}
	run := func(iface, name string, args map[string]any) error {
		_, err := drv.ExecuteStep(ctx, tk, steps.Clean, steps.Step{Interface: iface, Name: name, Args: args})
		return err
	}
	if err := run("bios", "apply_configuration", map[string]any{"settings": []any{map[string]any{"name": "ProcHyperthreading", "value": "Disabled"}}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := drv.BIOS().CacheBIOSSettings(ctx, tk); !slices.ContainsFunc(st, func(b driver.BIOSSetting) bool {
		return b.Name == "ProcHyperthreading" && b.Value == "Disabled" && len(b.AllowableValues) == 2
	}) {
		t.Fatalf("setting not applied: %+v", st)
	}
	var ip *driver.InvalidParameterError
	if err := run("bios", "apply_configuration", map[string]any{}); !errors.As(err, &ip) {
		t.Fatalf("want InvalidParameterError, got %v", err)
	}
	if err := run("bios", "factory_reset", nil); err != nil {
		t.Fatal(err)
	}
	if err := run("bios", "no_such_step", nil); !errors.Is(err, driver.ErrStepNotFound) {
		t.Fatalf("want ErrStepNotFound, got %v", err)
	}

	cfg := map[string]any{"logical_disks": []any{
		map[string]any{"size_gb": 100.0, "raid_level": "1", "is_root_volume": true},
		map[string]any{"size_gb": "MAX", "raid_level": "0"},
	}}
	if err := drv.RAID().ValidateRAIDConfig(ctx, tk, map[string]any{"logical_disks": []any{map[string]any{"size_gb": 1.0, "raid_level": "7"}}}); !errors.As(err, &ip) {
		t.Fatalf("bad raid level: %v", err)
	}
	if err := run("raid", "create_configuration", map[string]any{"target_raid_config": cfg, "delete_existing": true}); err != nil {
		t.Fatal(err)
	}
	if v := s.Volumes(); len(v) != 2 {
		t.Fatalf("volumes after create: %v", v)
	}
	rc := tk.Changes().DriverInternalInfo["raid_config"].(map[string]any)["logical_disks"].([]any)
	if len(rc) != 2 || rc[0].(map[string]any)["size_gb"] != int64(100) {
		t.Fatalf("raid_config %v", rc)
	}
	if err := run("raid", "delete_configuration", nil); err != nil || len(s.Volumes()) != 0 {
		t.Fatalf("delete: %v, left %v", err, s.Volumes())
	}

	fw := firmwareServer(t)
	resets := len(s.Stats().Resets)
	if err := run("firmware", "update", map[string]any{"settings": []any{map[string]any{"component": "bios", "url": fw + "/P80-v2.bin"}}}); err != nil {
		t.Fatal(err)
	}
	// The BMC staged the BIOS and asked for a reset: the step rebooted.
	if len(s.Stats().Resets) != resets+1 || s.FirmwareVersion("/redfish/v1/UpdateService/FirmwareInventory/BIOS") != "P80-v2" {
		t.Fatalf("resets %v, BIOS %q", s.Stats().Resets[resets:], s.FirmwareVersion("/redfish/v1/UpdateService/FirmwareInventory/BIOS"))
	}
	tk.DriverInternalInfo = tk.Changes().DriverInternalInfo
	comps, err := drv.Firmware().CacheFirmwareComponents(ctx, tk)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]driver.FirmwareComponent{}
	for _, c := range comps {
		got[c.Component] = c
	}
	if b := got["bios"]; b.InitialVersion != "P79 v1.45" || b.CurrentVersion != "P80-v2" || b.LastVersionFlashed != "P80-v2" {
		t.Fatalf("bios component %+v", b)
	}
	if b := got["bmc"]; b.CurrentVersion == "" || b.LastVersionFlashed != "" || b.Model != "Joo Janta 200" {
		t.Fatalf("bmc component %+v; want the manager's model", b)
	}
	if b := got["bios"]; b.Model != "" || b.Vendor != "" || b.SerialNumber != "" {
		t.Fatalf("bios component %+v; want no identity, as Ironic's", b)
	}
	// The BMC's own firmware: applied at once, no reset; the BIOS keeps
	// its initial version in the cache.
	if err := run("firmware", "update", map[string]any{"settings": []any{map[string]any{"component": "bmc", "url": fw + "/bmc-3.1.bin"}}}); err != nil {
		t.Fatal(err)
	}
	if len(s.Stats().Resets) != resets+1 {
		t.Fatalf("a BMC update rebooted the system: %v", s.Stats().Resets[resets:])
	}
	tk.DriverInternalInfo = tk.Changes().DriverInternalInfo
	cache := tk.DriverInternalInfo[FirmwareCacheKey].([]any)
	for _, e := range cache {
		m := e.(map[string]any)
		if m["component"] == "bios" && (m["initial_version"] != "P79 v1.45" || m["last_version_flashed"] != "P80-v2") {
			t.Fatalf("bios cache %v", m)
		}
		if m["component"] == "bmc" && (m["current_version"] != "bmc-3.1" || m["last_version_flashed"] != "bmc-3.1") {
			t.Fatalf("bmc cache %v", m)
		}
	}
	// A bad image URL: the BMC's task fails and so does the step, with
	// the BMC's message.
	if err := run("firmware", "update", map[string]any{"settings": []any{map[string]any{"component": "bios", "url": fw + "/missing.bin"}}}); !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), "missing.bin") {
		t.Fatalf("bad image: %v", err)
	}
	if err := run("firmware", "update", map[string]any{"settings": []any{map[string]any{"component": "gpu", "url": fw + "/y.bin"}}}); !errors.As(err, &ip) {
		t.Fatalf("unknown component: %v", err)
	}
	// The BIOS refuses a read-only attribute and a value outside its
	// registry (the driver checks first; so does the BMC).
	if err := run("bios", "apply_configuration", map[string]any{"settings": []any{map[string]any{"name": "EmbeddedSata", "value": "Ahci"}}}); err == nil {
		t.Fatal("a read-only BIOS attribute was applied")
	}
}

func TestVendorEjectVMedia(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	d := newDrivers(t)
	ctx := context.Background()
	tk := task(s, nil)
	if err := d.VirtualMediaBoot().PrepareRamdisk(ctx, tk, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Vendor().Call(ctx, tk, "eject_vmedia", "POST", nil); err != nil {
		t.Fatal(err)
	}
	if cd := s.Resource("/redfish/v1/Systems/" + redfishtest.SystemID + "/VirtualMedia/CD1"); cd["Inserted"] != false {
		t.Fatal("not ejected")
	}
	if _, err := d.Vendor().Call(ctx, tk, "explode", "POST", nil); !errors.Is(err, driver.ErrUnsupported) {
		t.Fatalf("unknown method: %v", err)
	}
}

// TestUnusableCABundleNamesNode checks that a redfish_verify_ca bundle
// that exists but holds no PEM certificate, found only when the
// connection is made, is reported as a *driver.InvalidParameterError
// naming the node, kind, implementation and key.
func TestUnusableCABundleNamesNode(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := newDrivers(t).Power().GetPowerState(context.Background(), task(s, map[string]any{"redfish_verify_ca": bundle}))
	var ip *driver.InvalidParameterError
	if !errors.As(err, &ip) || ip.Node != "node-1" || ip.Kind != driver.KindPower || ip.Impl != ImplRedfish || ip.Field != "driver_info" || ip.Key != "redfish_verify_ca" {
		t.Fatalf("GetPowerState = %#v, want an *InvalidParameterError on node-1's redfish_verify_ca", err)
	}
}

// TestIPv6Address: redfish_address as an IPv6 literal (bare, bracketed
// with a port, or a URL) makes a bracketed endpoint; the driver powers a
// BMC listening on [::1] through it.
func TestIPv6Address(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"fd00:a6::9", "https://[fd00:a6::9]"},
		{"[fd00:a6::9]:8443", "https://[fd00:a6::9]:8443"},
		{"http://[fd00:a6::9]:8000/redfish", "http://[fd00:a6::9]:8000/redfish"},
	} {
		info, err := parseInfo(map[string]any{"redfish_address": tc.in})
		if err != nil || info.Endpoint != tc.want {
			t.Errorf("%s: endpoint %q, %v; want %q", tc.in, info.Endpoint, err, tc.want)
		}
	}
	if _, err := parseInfo(map[string]any{"redfish_address": "https://fd00:a6::9:8443"}); err == nil || !strings.Contains(err.Error(), "brackets") {
		t.Errorf("an unbracketed IPv6 address with a port: %v, want a refusal naming brackets", err)
	}
	s := newServer(t, redfishtest.Options{IPv6: true})
	if !strings.HasPrefix(s.URL(), "http://[::1]:") {
		t.Fatalf("server at %s, want [::1]", s.URL())
	}
	d := newDrivers(t)
	ctx := context.Background()
	tk := task(s, nil)
	if err := d.Power().SetPowerState(ctx, tk, driver.PowerOn, 0); err != nil {
		t.Fatalf("power on over IPv6: %v", err)
	}
	if st, err := d.Power().GetPowerState(ctx, tk); err != nil || st != driver.PowerOn {
		t.Fatalf("power state over IPv6: %s, %v", st, err)
	}
}
