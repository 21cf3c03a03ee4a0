package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/driver/plugin/plugintest"
	"github.com/anvilmetal/anvil/internal/ipmisim"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
)

// thePlugin is this package's plugin executable, built once for the test
// binary.
var thePlugin = &plugintest.Plugin{Package: ".", Name: "ipmi"}

func TestMain(m *testing.M) { plugintest.Main(m, thePlugin) }

func load(t testing.TB, logs *plugintest.LogBuffer) map[driver.Kind]driver.Interface {
	t.Helper()
	impls, _ := loadPlugin(t, logs)
	return impls
}

// loadPlugin starts the plugin under a fresh host and returns its
// implementations and the plugin handle.
func loadPlugin(t testing.TB, logs *plugintest.LogBuffer) (map[driver.Kind]driver.Interface, *plugin.Plugin) {
	t.Helper()
	var sink io.Writer
	if logs != nil {
		sink = logs
	}
	host, _ := plugintest.Load(t, thePlugin.Path(t), plugintest.Options{Logs: sink})
	p := host.Plugins()[0]
	b, err := p.Bundle()
	if err != nil {
		t.Fatal(err)
	}
	if len(b.HardwareTypes) != 1 || b.HardwareTypes[0].Name != ipmitool.HardwareType {
		t.Fatalf("hardware types %+v", b.HardwareTypes)
	}
	out := map[driver.Kind]driver.Interface{}
	for _, i := range b.Implementations {
		if i.Name != ipmitool.ImplIPMITool {
			t.Fatalf("%s implementation %q", i.Kind, i.Name)
		}
		out[i.Kind] = i.Impl
	}
	if len(out) != 3 {
		t.Fatalf("implementations %v", out)
	}
	return out, p
}

func simTask(b *ipmisim.BMC, password string) *driver.Task {
	return &driver.Task{NodeUUID: "node-ipmi", HardwareType: ipmitool.HardwareType, DriverInfo: map[string]any{
		"ipmi_address": b.Addr, "ipmi_port": strconv.Itoa(b.Port), "ipmi_username": b.Username,
		"ipmi_password": password, "ipmi_cipher_suite": "3",
	}}
}

// TestUnavailableWithoutIpmitool starts the plugin where ipmitool cannot
// be found: it still describes itself, and validation gives the reason.
func TestUnavailableWithoutIpmitool(t *testing.T) {
	t.Setenv("ANVIL_IPMITOOL_PATH", "/nonexistent/ipmitool")
	logs := &plugintest.LogBuffer{}
	impls := load(t, logs)
	tk := &driver.Task{NodeUUID: "n1", DriverInfo: map[string]any{"ipmi_address": "10.0.0.1"}}
	err := impls[driver.KindPower].Validate(context.Background(), tk)
	if err == nil || !strings.Contains(err.Error(), "ipmitool is not installed") {
		t.Fatalf("validate: %v", err)
	}
	if _, err := impls[driver.KindPower].(driver.PowerInterface).GetPowerState(context.Background(), tk); err == nil || !strings.Contains(err.Error(), "install the ipmitool package") {
		t.Fatalf("power state: %v", err)
	}
	if !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("power state error does not match driver.ErrUnavailable: %v", err)
	}
	for k, impl := range impls {
		var ue *driver.UnavailableError
		if err := driver.Available(impl); !errors.As(err, &ue) || ue.Kind != k || !strings.Contains(ue.Reason, "ipmitool is not installed") {
			t.Errorf("%s: host sees availability %v", k, err)
		}
	}
	if !strings.Contains(logs.String(), "unavailable on this host") {
		t.Fatalf("the plugin did not log why it is unavailable:\n%s", logs.String())
	}
	var miss *driver.MissingParameterError
	if err := impls[driver.KindManagement].Validate(context.Background(), &driver.Task{NodeUUID: "n1"}); !errors.As(err, &miss) || miss.Missing[0] != "ipmi_address" {
		t.Fatalf("typed error across the boundary: %#v", err)
	}
}

// TestUnavailableWithoutIpmitoolOnPath starts the plugin with a PATH that
// lacks ipmitool: the host's status of the plugin lists every
// implementation as unavailable with the reason.
func TestUnavailableWithoutIpmitoolOnPath(t *testing.T) {
	t.Setenv("ANVIL_IPMITOOL_PATH", "")
	t.Setenv("PATH", t.TempDir())
	impls, p := loadPlugin(t, nil)
	st := p.Status()
	for _, k := range []driver.Kind{driver.KindPower, driver.KindManagement, driver.KindVendor} {
		reason := st.Unavailable[string(k)+"/"+ipmitool.ImplIPMITool]
		if !strings.Contains(reason, "ipmitool is not installed") || !strings.Contains(reason, "install the ipmitool package") {
			t.Errorf("status of %s: unavailable %q", k, reason)
		}
	}
	// Discovery reports it too, and warns in the host's log.
	dir := t.TempDir()
	if err := os.Symlink(thePlugin.Path(t), filepath.Join(dir, "anvil-driver-ipmi")); err != nil {
		t.Fatal(err)
	}
	logs := &plugintest.LogBuffer{}
	host := plugin.NewHost(plugin.HostConfig{Dirs: []string{dir}, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	defer host.Close()
	rep, err := host.Discover(context.Background())
	if err != nil || len(rep.Plugins) != 1 {
		t.Fatalf("discover: %v %v", err, rep.Err())
	}
	if u := rep.Unavailable()["ipmi"]; len(u) != 3 || !strings.Contains(u["power/ipmitool"], "ipmitool is not installed") {
		t.Errorf("report unavailable = %v", rep.Unavailable())
	}
	if !strings.Contains(logs.String(), "unavailable on this host") || !strings.Contains(logs.String(), "power/ipmitool") {
		t.Errorf("host log lacks the unavailable warning:\n%s", logs.String())
	}
	sr, _ := driver.As[driver.SensorReader](impls[driver.KindManagement])
	_, err = sr.Sensors(context.Background(), &driver.Task{NodeUUID: "n1", DriverInfo: map[string]any{"ipmi_address": "10.0.0.1"}})
	var ue *driver.UnavailableError
	if !errors.As(err, &ue) || ue.Kind != driver.KindManagement || ue.Impl != ipmitool.ImplIPMITool {
		t.Fatalf("sensors without ipmitool: %#v", err)
	}
}

// TestManagementCapabilitiesThroughPlugin reaches the NMI and sensor
// capabilities through the plugin process, against ipmi_sim. The
// simulator has no sensor data repository (an empty list, not an error)
// and no diagnostic interrupt in its chassis control (a typed command
// error naming the ipmitool command, quickly, not a hang).
func TestManagementCapabilitiesThroughPlugin(t *testing.T) {
	ipmisim.Require(t)
	bmc := ipmisim.Start(t, ipmisim.Options{})
	impls := load(t, nil)
	m := impls[driver.KindManagement]
	if err := driver.Available(m); err != nil {
		t.Fatalf("available: %v", err)
	}
	if _, ok := driver.As[driver.IndicatorManager](m); ok {
		t.Error("ipmitool management offers IndicatorManager, which it does not implement")
	}
	sr, ok := driver.As[driver.SensorReader](m)
	if !ok {
		t.Fatal("no SensorReader through the plugin")
	}
	tk := simTask(bmc, bmc.Password)
	if r, err := sr.Sensors(context.Background(), tk); err != nil || len(r) != 0 {
		t.Fatalf("sensors of the simulator: %+v, %v", r, err)
	}
	nmi, ok := driver.As[driver.NMIInjector](m)
	if !ok {
		t.Fatal("no NMIInjector through the plugin")
	}
	var remote *plugin.RemoteError
	err := nmi.InjectNMI(context.Background(), tk)
	if !errors.As(err, &remote) || !strings.Contains(err.Error(), "chassis power diag") || errors.Is(err, driver.ErrUnsupported) {
		t.Fatalf("nmi on the simulator: %v", err)
	}
}

// TestConformanceThroughPlugin runs the conformance suite on the proxied
// implementations against ipmi_sim, and checks secrets stay out of logs.
func TestConformanceThroughPlugin(t *testing.T) {
	ipmisim.Require(t)
	bmc := ipmisim.Start(t, ipmisim.Options{})
	logs := &plugintest.LogBuffer{}
	host, _ := plugintest.Load(t, thePlugin.Path(t), plugintest.Options{Logs: logs})
	plugintest.Conformance(t, host, plugintest.Suite{
		NewTask: func() *driver.Task { return simTask(bmc, bmc.Password) },
		Slow: func(k driver.Kind, _ string) func(*driver.Task) {
			if k == driver.KindVendor {
				return nil // passthru methods answer from the task alone
			}
			return func(tk *driver.Task) { tk.DriverInfo["ipmi_port"] = "1" }
		},
	})
	impls := plugintest.Implementations(t, host)
	if len(impls) != 3 {
		t.Fatalf("implementations %v, want power, management and vendor", impls)
	}
	mgmt := impls[driver.KindManagement][ipmitool.ImplIPMITool].(driver.ManagementInterface)
	tk := simTask(bmc, bmc.Password)
	if err := mgmt.SetBootDevice(context.Background(), tk, driver.BootPXE, false); err != nil || bmc.Boot() != "pxe" {
		t.Fatalf("boot device through the plugin: %v (sim %s)", err, bmc.Boot())
	}
	const secret = "Zq9wrongPw"
	_, err := impls[driver.KindPower][ipmitool.ImplIPMITool].(driver.PowerInterface).GetPowerState(context.Background(), simTask(bmc, secret))
	if err == nil || strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
		t.Fatalf("wrong password leaked or accepted: %v", err)
	}
}

// BenchmarkPowerStateThroughPlugin measures one power-state read from the
// host, through the plugin process and ipmitool, to ipmi_sim.
func BenchmarkPowerStateThroughPlugin(b *testing.B) {
	ipmisim.Require(b)
	bmc := ipmisim.Start(b, ipmisim.Options{})
	p := load(b, nil)[driver.KindPower].(driver.PowerInterface)
	tk := simTask(bmc, bmc.Password)
	for b.Loop() {
		if _, err := p.GetPowerState(context.Background(), tk); err != nil {
			b.Fatal(err)
		}
	}
}

func TestOptionsFromEnvironment(t *testing.T) {
	for _, tc := range []struct {
		retry, interval string
		wantRetry       time.Duration
		wantInterval    time.Duration
		warnings        int
	}{
		{"", "", 0, 0, 0}, // the client's defaults: 60 s and 5 s
		{"3", "1", 3 * time.Second, time.Second, 0},
		{"1500ms", "250ms", 1500 * time.Millisecond, 250 * time.Millisecond, 0},
		{"-1", "soon", 0, 0, 2},
	} {
		env := map[string]string{envRetryTimeout: tc.retry, envMinCommandInterval: tc.interval, "ANVIL_IPMITOOL_PATH": "/opt/ipmitool"}
		opts, warnings := options(func(k string) string { return env[k] })
		if opts.RetryTimeout != tc.wantRetry || opts.MinCommandInterval != tc.wantInterval || len(warnings) != tc.warnings || opts.IpmitoolPath != "/opt/ipmitool" {
			t.Errorf("%q %q: %+v %q", tc.retry, tc.interval, opts, warnings)
		}
	}
}

// TestBMCErrorsThroughPlugin: a wrong password, a closed port and another
// machine at the node's address reach the host as the typed driver errors
// with their fields, from the plugin process, against ipmi_sim; the
// identity the first contact recorded comes back in the task.
func TestBMCErrorsThroughPlugin(t *testing.T) {
	ipmisim.Require(t)
	t.Setenv(envRetryTimeout, "3")
	t.Setenv(envMinCommandInterval, "1")
	bmc := ipmisim.Start(t, ipmisim.Options{})
	other := ipmisim.Start(t, ipmisim.Options{})
	p := load(t, nil)[driver.KindPower].(driver.PowerInterface)
	ctx := context.Background()
	endpoint := "127.0.0.1:" + strconv.Itoa(bmc.Port)

	start := time.Now()
	_, err := p.GetPowerState(ctx, simTask(bmc, "Zq9wrongPw"))
	var ae *driver.BMCAuthError
	if !errors.As(err, &ae) || !errors.Is(err, driver.ErrBMCAuthentication) || ae.Address != endpoint || ae.Username != bmc.Username || ae.Node != "node-ipmi" || strings.Contains(err.Error(), "Zq9wrongPw") {
		t.Fatalf("wrong password: %T %v", err, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("wrong password took %v", took)
	}

	closed := simTask(bmc, bmc.Password)
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	c.Close()
	closed.DriverInfo["ipmi_port"] = strconv.Itoa(port)
	start = time.Now()
	_, err = p.GetPowerState(ctx, closed)
	took := time.Since(start)
	var ue *driver.BMCUnreachableError
	if !errors.As(err, &ue) || ue.Address != "127.0.0.1:"+strconv.Itoa(port) || ue.Attempts < 1 || ue.Waited == "" {
		t.Fatalf("closed port: %T %v", err, err)
	}
	if took > 4*time.Second {
		t.Fatalf("closed port took %v with a 3 s retry timeout", took)
	}

	tk := simTask(bmc, bmc.Password)
	if _, err := p.GetPowerState(ctx, tk); err != nil {
		t.Fatal(err)
	}
	recorded, _ := tk.DriverInternalInfo[driver.IdentityKey].(string)
	if !strings.HasPrefix(recorded, "ipmi-guid:") {
		t.Fatalf("identity not recorded through the plugin: %v", tk.DriverInternalInfo)
	}
	tk.DriverInfo["ipmi_port"] = strconv.Itoa(other.Port)
	err = p.SetPowerState(ctx, tk, driver.PowerOn, 10*time.Second)
	var mm *driver.IdentityMismatchError
	if !errors.As(err, &mm) || mm.Recorded != recorded || other.Power() {
		t.Fatalf("another machine: %T %v (power %v)", err, err, other.Power())
	}
}
