package ipmitool

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/ipmisim"
	"github.com/anvilmetal/anvil/steps"
)

func TestDriverValidate(t *testing.T) {
	d := NewDrivers(Options{})
	ctx := context.Background()
	var mp *driver.MissingParameterError
	if err := d.Power().Validate(ctx, &driver.Task{NodeUUID: "n1"}); !errors.As(err, &mp) || mp.Missing[0] != "ipmi_address" || mp.Impl != ImplIPMITool {
		t.Fatalf("want MissingParameterError, got %v", err)
	}
	var ip *driver.InvalidParameterError
	err := d.Management().Validate(ctx, &driver.Task{NodeUUID: "n1", DriverInfo: map[string]any{"ipmi_address": "bmc", "ipmi_priv_level": "GOD", "ipmi_password": "s3cr3t"}})
	if !errors.As(err, &ip) || ip.Key != "ipmi_priv_level" || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("want InvalidParameterError, got %v", err)
	}
	_, err = d.Vendor().Call(ctx, &driver.Task{NodeUUID: "n1", DriverInfo: map[string]any{"ipmi_address": "bmc"}}, "send_raw", "POST", map[string]any{"raw_bytes": "0xzz"})
	if !errors.As(err, &ip) || ip.Key != "raw_bytes" {
		t.Fatalf("bad raw bytes: %v", err)
	}
	if _, err := d.Vendor().Call(ctx, &driver.Task{NodeUUID: "n1"}, "reformat", "POST", nil); !errors.Is(err, driver.ErrUnsupported) {
		t.Fatalf("unknown method: %v", err)
	}
}

func TestDriverUnavailableWithoutIpmitool(t *testing.T) {
	d := NewDrivers(Options{IpmitoolPath: "/nonexistent/ipmitool"})
	if !errors.Is(d.Unavailable(), ErrNotInstalled) {
		t.Fatalf("Unavailable: %v", d.Unavailable())
	}
	tk := &driver.Task{NodeUUID: "n1", DriverInfo: map[string]any{"ipmi_address": "bmc"}}
	ctx := context.Background()
	if err := d.Power().Validate(ctx, tk); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "install the ipmitool package") {
		t.Fatalf("validate: %v", err)
	}
	if _, err := d.Power().GetPowerState(ctx, tk); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("power state: %v", err)
	}
	if len(d.Power().Properties()) != len(Properties()) {
		t.Fatal("an unavailable driver still describes its properties")
	}
}

func simTask(b *ipmisim.BMC) *driver.Task {
	return &driver.Task{NodeUUID: "node-ipmi", HardwareType: HardwareType, DriverInfo: map[string]any{
		"ipmi_address": b.Addr, "ipmi_port": strconv.Itoa(b.Port), "ipmi_username": b.Username,
		"ipmi_password": b.Password, "ipmi_cipher_suite": "3",
	}}
}

func TestDriverAgainstSimulator(t *testing.T) {
	ipmisim.Require(t)
	b := ipmisim.Start(t, ipmisim.Options{})
	d := NewDrivers(Options{PollInterval: 50 * time.Millisecond})
	ctx := context.Background()
	tk := simTask(b)
	p, m, v := d.Power(), d.Management(), d.Vendor()
	if err := p.Validate(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if err := p.SetPowerState(ctx, tk, driver.PowerOn, 10*time.Second); err != nil || !b.Power() {
		t.Fatalf("power on: %v", err)
	}
	if st, err := p.GetPowerState(ctx, tk); err != nil || st != driver.PowerOn {
		t.Fatalf("%q %v", st, err)
	}
	if err := p.SetPowerState(ctx, tk, driver.PowerOff, 10*time.Second); err != nil || b.Power() {
		t.Fatalf("power off: %v", err)
	}
	tk.Properties = map[string]any{"capabilities": "boot_mode:uefi"}
	if err := m.SetBootDevice(ctx, tk, driver.BootCDROM, false); err != nil || b.Boot() != "cdrom" {
		t.Fatalf("boot cdrom: %v (sim %s)", err, b.Boot())
	}
	if bd, err := m.GetBootDevice(ctx, tk); err != nil || bd.Device != driver.BootCDROM {
		t.Fatalf("%+v %v", bd, err)
	}
	out, err := v.Call(ctx, tk, "send_raw", "POST", map[string]any{"raw_bytes": "0x06 0x01"})
	if err != nil || !strings.HasPrefix(out.(map[string]any)["response"].(string), "0x00 ") {
		t.Fatalf("send_raw: %v %v", out, err)
	}
	c, err := m.client(tk)
	if err != nil {
		t.Fatal(err)
	}
	// Add SEL Entry (storage netfn 0x0a, command 0x44): a system event record.
	if _, err := c.Raw(ctx, 0x0a, 0x44, []byte{0, 0, 0x02, 0, 0, 0, 0, 0x20, 0, 0x04, 0x01, 0x30, 0x01, 0x09, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if info, _ := c.run(ctx, "sel info", "sel", "info"); !strings.Contains(info, "Entries") || strings.Contains(info, "Entries          : 0") {
		t.Fatalf("SEL should hold an entry:\n%s", info)
	}
	if _, err := m.ExecuteStep(ctx, tk, steps.Clean, steps.Step{Interface: "management", Name: "clear_system_event_log"}); err != nil {
		t.Fatalf("clear SEL: %v", err)
	}
	if info, _ := c.run(ctx, "sel info", "sel", "info"); !strings.Contains(info, "Entries          : 0") {
		t.Fatalf("SEL not cleared:\n%s", info)
	}
	if _, err := m.ExecuteStep(ctx, tk, steps.Clean, steps.Step{Interface: "management", Name: "nope"}); !errors.Is(err, driver.ErrStepNotFound) {
		t.Fatalf("unknown step: %v", err)
	}
	// A BMC that does not answer: the call ends at the deadline.
	dead := simTask(b)
	dead.DriverInfo["ipmi_port"] = "1"
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := p.GetPowerState(cctx, dead); err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("unreachable BMC: %v after %v", err, time.Since(start))
	}
}

// TestHardwareTypeInheritsGenericLists checks the ipmi hardware type's
// supported lists against Ironic's (IPMIHardware extends GenericHardware,
// reference §3): in particular in-band inspection ("agent") is supported,
// before no-inspect, so that an ipmi node can be inspected by its ramdisk.
func TestHardwareTypeInheritsGenericLists(t *testing.T) {
	h := HardwareTypeDef()
	for _, tc := range []struct {
		kind driver.Kind
		want []string
	}{
		{driver.KindBoot, []string{"ipxe", "pxe", "http-ipxe", "http"}},
		{driver.KindDeploy, []string{"autodetect", "direct", "ansible", "ramdisk", "anaconda", "bootc", "custom-agent"}},
		{driver.KindInspect, []string{"agent", driver.NoInspect}},
		{driver.KindPower, []string{ImplIPMITool}},
	} {
		if got := h.SupportedFor(tc.kind); !slices.Equal(got, tc.want) {
			t.Errorf("%s interfaces %v, want %v", tc.kind, got, tc.want)
		}
	}
}
