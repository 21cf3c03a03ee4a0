package ipmitool

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/ipmisim"
)

// parseInfo reads di as the driver_info of node-1's power interface.
func parseInfo(di map[string]any) (Info, error) {
	return ParseInfo(driver.NewInfoReader("node-1", driver.KindPower, ImplIPMITool, "driver_info", di))
}

func TestParseInfo(t *testing.T) {
	cases := []struct {
		name    string
		di      map[string]any
		field   string
		missing bool
	}{
		{"missing address", map[string]any{}, "ipmi_address", true},
		{"address with port", map[string]any{"ipmi_address": "10.0.0.1:623"}, "ipmi_address", false},
		{"address like a flag", map[string]any{"ipmi_address": "-oProxyCommand"}, "ipmi_address", false},
		{"bad port", map[string]any{"ipmi_address": "bmc", "ipmi_port": "70000"}, "ipmi_port", false},
		{"port not a number", map[string]any{"ipmi_address": "bmc", "ipmi_port": "http"}, "ipmi_port", false},
		{"bad terminal port", map[string]any{"ipmi_address": "bmc", "ipmi_terminal_port": 0.0}, "ipmi_terminal_port", false},
		{"unknown privilege", map[string]any{"ipmi_address": "bmc", "ipmi_priv_level": "ROOT"}, "ipmi_priv_level", false},
		{"bad protocol", map[string]any{"ipmi_address": "bmc", "ipmi_protocol_version": "3.0"}, "ipmi_protocol_version", false},
		{"bad cipher", map[string]any{"ipmi_address": "bmc", "ipmi_cipher_suite": "99"}, "ipmi_cipher_suite", false},
		{"cipher with 1.5", map[string]any{"ipmi_address": "bmc", "ipmi_cipher_suite": 3.0, "ipmi_protocol_version": "1.5"}, "ipmi_cipher_suite", false},
		{"username not a string", map[string]any{"ipmi_address": "bmc", "ipmi_username": 7.0}, "ipmi_username", false},
		{"privilege not a string", map[string]any{"ipmi_address": "bmc", "ipmi_priv_level": 4.0}, "ipmi_priv_level", false},
		{"password too long", map[string]any{"ipmi_address": "bmc", "ipmi_password": "secretpw-secretpw-secretpw"}, "ipmi_password", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseInfo(tc.di)
			var me *driver.MissingParameterError
			var ie *driver.InvalidParameterError
			switch {
			case tc.missing:
				if !errors.As(err, &me) || len(me.Missing) != 1 || me.Missing[0] != tc.field || me.Node != "node-1" || me.Impl != ImplIPMITool || me.Field != "driver_info" {
					t.Fatalf("got %v, want a *driver.MissingParameterError on %s", err, tc.field)
				}
			default:
				if !errors.As(err, &ie) || ie.Key != tc.field || ie.Node != "node-1" || ie.Impl != ImplIPMITool || ie.Field != "driver_info" || ie.Expected == "" || !errors.Is(err, driver.ErrInvalidParameter) {
					t.Fatalf("got %v, want a *driver.InvalidParameterError on %s", err, tc.field)
				}
			}
			if strings.Contains(err.Error(), "secretpw") {
				t.Fatalf("password leaked: %v", err)
			}
		})
	}
	i, err := parseInfo(map[string]any{"ipmi_address": "bmc1", "ipmi_port": 6230.0, "ipmi_priv_level": "operator", "ipmi_cipher_suite": "3", "ipmi_username": "u", "ipmi_password": "secretpw"})
	if err != nil {
		t.Fatal(err)
	}
	if i.Port != 6230 || i.PrivLevel != "OPERATOR" || i.CipherSuite != "3" || i.ProtocolVersion != "2.0" || strings.Contains(i.String(), "secretpw") {
		t.Fatalf("unexpected %+v", i)
	}
}

func TestParsers(t *testing.T) {
	bd, err := parseBootParam("Boot parameter version: 1\nBoot parameter 5 is valid/unlocked\nBoot parameter data: e008000000\n Boot Flags :")
	if err != nil || bd != (BootDevice{Device: "disk", Persistent: true, EFI: true}) {
		t.Fatalf("%+v %v", bd, err)
	}
	bd, err = parseBootParam("Boot parameter data: 0014000000")
	if err != nil || bd != (BootDevice{Device: "cdrom"}) {
		t.Fatalf("%+v %v", bd, err)
	}
	if _, err := parseBootParam("garbage"); !errors.Is(err, ErrCommand) {
		t.Fatalf("want ErrCommand, got %v", err)
	}
	if _, err := parseBootParam("Boot parameter data: zz"); !errors.Is(err, ErrCommand) {
		t.Fatalf("want ErrCommand, got %v", err)
	}
	raw, err := parseRaw(" 00 03 09 08\n 02 9f")
	if err != nil || len(raw) != 6 || raw[5] != 0x9f {
		t.Fatalf("%x %v", raw, err)
	}
	if _, err := parseRaw("Unable to send"); err == nil {
		t.Fatal("want an error for non-hex output")
	}
	s := parseSensors("CPU Temp         | 30h | ok  |  3.1 | 45 degrees C\nFan 1 | 31h | ns | 29.1 | No Reading\nnot a sensor line")
	if len(s) != 2 || s[0] != (Sensor{Name: "CPU Temp", Reading: "45", Unit: "degrees C", Status: "ok"}) || s[1].Status != "ns" {
		t.Fatalf("%+v", s)
	}
}

func TestNotInstalled(t *testing.T) {
	_, err := New(Info{Address: "bmc", PrivLevel: "ADMINISTRATOR", ProtocolVersion: "2.0"}, Options{IpmitoolPath: "/nonexistent/ipmitool"})
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("want ErrNotInstalled, got %v", err)
	}
}

func simClient(t *testing.T, b *ipmisim.BMC, extra map[string]any) *Client {
	t.Helper()
	di := map[string]any{"ipmi_address": b.Addr, "ipmi_port": float64(b.Port), "ipmi_username": b.Username, "ipmi_password": b.Password, "ipmi_cipher_suite": "3"}
	for k, v := range extra {
		if v == nil {
			delete(di, k)
			continue
		}
		di[k] = v
	}
	info, err := parseInfo(di)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(info, Options{PollInterval: 50 * time.Millisecond, PowerTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAgainstSimulator(t *testing.T) {
	ipmisim.Require(t)
	b := ipmisim.Start(t, ipmisim.Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		extra map[string]any
		full  bool // run every operation, not only a power and boot change
	}{
		{"administrator", nil, true},
		{"direct operator", map[string]any{"ipmi_priv_level": "OPERATOR"}, false},
		{"direct IPMI 1.5", map[string]any{"ipmi_protocol_version": "1.5", "ipmi_cipher_suite": nil}, false},
		{"negotiated cipher", map[string]any{"ipmi_cipher_suite": nil}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := simClient(t, b, tc.extra)
			if wantIface := map[bool]string{true: "lan", false: "lanplus"}[tc.extra["ipmi_protocol_version"] == "1.5"]; c.args("")[1] != wantIface {
				t.Fatalf("interface %s, want %s", c.args("")[1], wantIface)
			}
			if !tc.full {
				// The direct path shares the command code; check the
				// session options reach the BMC and state reads back.
				if err := c.PowerOn(ctx, 0); err != nil || !b.Power() {
					t.Fatalf("power on: %v", err)
				}
				if err := c.SetBootDevice(ctx, "cdrom", false, false); err != nil || b.Boot() != "cdrom" {
					t.Fatalf("bootdev cdrom: %v (sim %s)", err, b.Boot())
				}
				return
			}
			if err := c.PowerOff(ctx, 0); err != nil || b.Power() {
				t.Fatalf("power off: %v (sim power %v)", err, b.Power())
			}
			if on, err := c.PowerState(ctx); err != nil || on {
				t.Fatalf("state %v %v", on, err)
			}
			if err := c.PowerOn(ctx, 0); err != nil || !b.Power() {
				t.Fatalf("power on: %v", err)
			}
			before := len(b.Events())
			if err := c.Reboot(ctx, 0); err != nil || !b.Power() {
				t.Fatalf("reboot: %v", err)
			}
			if ev := b.Events()[before:]; len(ev) < 2 || ev[0] != "power 0" || ev[len(ev)-1] != "power 1" {
				t.Fatalf("reboot must be off then on, events %v", ev)
			}
			if err := c.SoftPowerOff(ctx, 0); err != nil || b.Power() {
				t.Fatalf("soft off: %v", err)
			}
			if err := c.SetBootDevice(ctx, "pxe", false, false); err != nil || b.Boot() != "pxe" {
				t.Fatalf("bootdev pxe: %v (sim %s)", err, b.Boot())
			}
			if bd, err := c.BootDevice(ctx); err != nil || bd.Device != "pxe" {
				t.Fatalf("read back %+v %v", bd, err)
			}
			if err := c.SetBootDevice(ctx, "disk", true, true); err != nil || b.Boot() != "default" {
				t.Fatalf("bootdev disk: %v (sim %s)", err, b.Boot())
			}
			if bd, err := c.BootDevice(ctx); err != nil || bd.Device != "disk" {
				t.Fatalf("read back %+v %v", bd, err)
			}
			id, err := c.Raw(ctx, 0x06, 0x01, nil) // Get Device ID
			if err != nil || len(id) < 11 || id[0] != 0x00 {
				t.Fatalf("raw get device id: %x %v", id, err)
			}
			if _, err := c.Sensors(ctx); err != nil {
				t.Fatalf("sensors: %v", err)
			}
			// ipmi_sim's chassis control has no diagnostic interrupt: the
			// failure must be a typed CommandError, not a hang.
			if err := c.NMI(ctx); !errors.Is(err, ErrCommand) {
				t.Fatalf("nmi on the simulator: %v", err)
			}
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		c := simClient(t, b, map[string]any{"ipmi_password": "hunter2wrong"})
		_, err := c.PowerState(ctx)
		if !errors.Is(err, ErrCommand) || !errors.Is(err, driver.ErrBMCAuthentication) || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("want an authentication CommandError without the password, got %v", err)
		}
	})
}

func TestTypedSensors(t *testing.T) {
	s := parseSensors("CPU Temp | 30h | ok | 3.1 | 45 degrees C\nFan 1 | 31h | ns | 29.1 | No Reading\nSys Fan | 32h | ok | 29.2 | 4200 RPM\n12V | 33h | ok | 7.1 | 12.10 Volts\nPSU | 34h | ok | 10.1 | 180 Watts\nIn | 35h | ok | 10.2 | 1.5 Amps\nIntrusion | 36h | ok | 23.1 | 0x00")
	var got []driver.SensorReading
	for _, x := range s {
		got = append(got, typedSensor(x))
	}
	want := []struct {
		typ   driver.SensorType
		value float64 // -1: none
		units string
	}{
		{driver.SensorTemperature, 45, "degrees C"}, {driver.SensorOther, -1, ""}, {driver.SensorFan, 4200, "RPM"},
		{driver.SensorVoltage, 12.1, "Volts"}, {driver.SensorPower, 180, "Watts"}, {driver.SensorCurrent, 1.5, "Amps"}, {driver.SensorOther, -1, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d readings: %+v", len(got), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Type != w.typ || g.Units != w.units || (w.value < 0) != (g.Value == nil) || (g.Value != nil && *g.Value != w.value) {
			t.Errorf("%s: %+v, want %+v", g.Name, g, w)
		}
	}
	if got[1].Reading != "No Reading" || got[1].Status != "ns" {
		t.Errorf("no-reading sensor: %+v", got[1])
	}
}

// TestIPv6Address: ipmi_address as an IPv6 literal, bare or in
// brackets, reaches ipmitool's -H bare; a bracketed non-IPv6 value is
// refused naming the key.
func TestIPv6Address(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"fd00:a6::9", "fd00:a6::9"},
		{"[fd00:a6::9]", "fd00:a6::9"},
		{"[::1]", "::1"},
	} {
		info, err := parseInfo(map[string]any{"ipmi_address": tc.in})
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		c, err := New(info, Options{})
		if err != nil {
			t.Fatal(err)
		}
		args := c.args("")
		if i := slices.Index(args, "-H"); i < 0 || args[i+1] != tc.want {
			t.Errorf("%s: ipmitool arguments %q, want -H %s", tc.in, args, tc.want)
		}
	}
	for _, bad := range []string{"[bmc.example]", "[192.0.2.9]", "[fd00::9]:623"} {
		_, err := parseInfo(map[string]any{"ipmi_address": bad})
		var ip *driver.InvalidParameterError
		if !errors.As(err, &ip) || !strings.Contains(err.Error(), "ipmi_address") {
			t.Errorf("%s: %v, want an invalid ipmi_address", bad, err)
		}
	}
}

// TestAgainstSimulatorOverIPv6 drives ipmi_sim listening on ::1 with
// the real ipmitool, the address given in brackets.
func TestAgainstSimulatorOverIPv6(t *testing.T) {
	ipmisim.Require(t)
	b := ipmisim.Start(t, ipmisim.Options{IPv6: true})
	c := simClient(t, b, map[string]any{"ipmi_address": "[" + b.Addr + "]"})
	ctx := context.Background()
	if err := c.PowerOn(ctx, 0); err != nil || !b.Power() {
		t.Fatalf("power on over IPv6: %v", err)
	}
	if on, err := c.PowerState(ctx); err != nil || !on {
		t.Fatalf("power state over IPv6: %v, %v", on, err)
	}
	if err := c.SetBootDevice(ctx, "pxe", false, false); err != nil || b.Boot() != "pxe" {
		t.Fatalf("bootdev pxe over IPv6: %v (sim %s)", err, b.Boot())
	}
	if err := c.PowerOff(ctx, 0); err != nil || b.Power() {
		t.Fatalf("power off over IPv6: %v", err)
	}
}
