package plugin_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/drivertest"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/internal/testlog"
	"github.com/anvilmetal/anvil/steps"
)

const nodeUUID = "3c0f7b8e-8f0e-4c4e-9a4b-6a9d2f1e0c77"

func newTask() *driver.Task {
	return &driver.Task{NodeUUID: nodeUUID, HardwareType: builtin.FakeHardware, DriverInfo: map[string]any{}}
}

func slow(t *driver.Task) { t.DriverInfo[fake.DelayKey] = "10s" }

// loadFake discovers a directory holding only the fake plugin and returns
// the host (closed at cleanup) and a registry holding only its proxies.
func loadFake(t *testing.T, cfg plugin.HostConfig) (*plugin.Host, *driver.Registry) {
	t.Helper()
	cfg.Dirs = []string{pluginDir(t, map[string]string{"anvil-driver-fake": bins.fake})}
	host := plugin.NewHost(cfg)
	t.Cleanup(func() { host.Close() })
	rep, err := host.Discover(context.Background())
	if err != nil || len(rep.Plugins) != 1 {
		t.Fatalf("Discover = %+v, %v (skipped: %v)", rep.Plugins, err, rep.Err())
	}
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindNetwork: {driver.Noop, fake.Name}, driver.KindStorage: {driver.Noop, fake.Name},
			driver.KindVendor: {fake.Name, driver.NoVendor}, driver.KindDeploy: {fake.Name, driver.Noop},
		},
	})
	if err := host.Register(reg); err != nil {
		t.Fatal(err)
	}
	return host, reg
}

func TestConformanceThroughPluginProcess(t *testing.T) {
	_, reg := loadFake(t, plugin.HostConfig{})
	if src, _ := reg.Source(driver.KindPower, fake.Name); !strings.HasPrefix(src, "plugin fake (") {
		t.Errorf("power/fake source = %q, want the plugin", src)
	}
	drv, err := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware, Interfaces: map[driver.Kind]string{
		driver.KindNetwork: fake.Name, driver.KindStorage: fake.Name}})
	if err != nil {
		t.Fatal(err)
	}
	drivertest.RunDriver(t, drv, newTask, slow)

	noop, err := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware, Interfaces: map[driver.Kind]string{
		driver.KindVendor: driver.NoVendor, driver.KindDeploy: driver.Noop}})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("noop", func(t *testing.T) { drivertest.RunDriver(t, noop, newTask, nil) })
}

func TestCallsThroughPlugin(t *testing.T) {
	host, reg := loadFake(t, plugin.HostConfig{})
	ctx := context.Background()
	drv, err := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware})
	if err != nil {
		t.Fatal(err)
	}
	task := newTask()

	// Changes made in the plugin come back into the caller's task.
	if _, err := drv.Inspect().InspectHardware(ctx, task); err != nil {
		t.Fatal(err)
	}
	c := task.Changes()
	if c.Properties["cpu_arch"] != "x86_64" || len(c.Ports) != 1 || c.Ports[0].Address != fake.MAC(nodeUUID) {
		t.Errorf("inspection changes = %+v", c)
	}

	// Steps described by the plugin and run in it.
	var names []string
	for _, s := range drv.Steps(steps.Deploy) {
		names = append(names, s.Interface+"."+s.Name)
	}
	if got := strings.Join(names, " "); !strings.Contains(got, "deploy.deploy") || !strings.Contains(got, "raid.create_configuration") {
		t.Errorf("deploy steps = %s", got)
	}
	if _, err := drv.ExecuteStep(ctx, task, steps.Deploy, steps.Step{Interface: "raid", Name: "create_configuration"}); err != nil {
		t.Fatal(err)
	}
	if task.DriverInternalInfo[fake.RAIDConfiguredKey] != true {
		t.Errorf("raid step did not record: %v", task.DriverInternalInfo)
	}

	// Optional capabilities survive the boundary on protocol 3.
	if _, ok := driver.As[driver.BootModeManager](drv.Management()); !ok {
		t.Error("management proxy lost BootModeManager")
	}
	testManagementCapabilities(ctx, t, drv.Management(), task)
	if err := driver.Available(drv.Power()); err != nil {
		t.Errorf("fake power reported unavailable: %v", err)
	}
	if sp, ok := driver.As[driver.StepPreparer](drv.Deploy()); !ok {
		t.Error("deploy proxy lost StepPreparer")
	} else if _, err := sp.PrepareSteps(ctx, task, steps.Clean); err != nil {
		t.Error(err)
	}

	// Vendor passthru, with a payload over gRPC's 4 MiB default limit.
	big := strings.Repeat("x", 4<<20+512<<10)
	out, err := drv.Vendor().Call(ctx, task, "echo", "POST", map[string]any{"blob": big})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := out.(map[string]any); m["blob"] != big {
		t.Error("4.5 MiB vendor payload did not round-trip")
	}

	// Typed errors cross the boundary.
	task.DriverInfo[fake.FailKey] = "power.reboot"
	err = drv.Power().Reboot(ctx, task, 0)
	var remote *plugin.RemoteError
	if !errors.Is(err, driver.ErrInjectedFailure) || !errors.As(err, &remote) || remote.Plugin != "fake" {
		t.Errorf("injected failure = %v", err)
	}
	err = drv.Power().SetPowerState(ctx, task, "sideways", 0)
	var inval *driver.InvalidParameterError
	if !errors.As(err, &inval) || inval.Node != nodeUUID || inval.Kind != driver.KindPower {
		t.Errorf("invalid target = %#v", err)
	}
	_, err = drv.Vendor().Call(ctx, task, "no_such_method", "POST", nil)
	var unsup *driver.UnsupportedError
	if !errors.As(err, &unsup) || !strings.Contains(err.Error(), "no_such_method") {
		t.Errorf("unknown vendor method = %v", err)
	}
	st := host.Plugins()[0].Status()
	if !st.Healthy || st.ProtocolVersion != plugin.ProtocolVersion || st.PID == 0 || st.Version != "1.0.0" {
		t.Errorf("status = %+v", st)
	}
}

func TestDiscoveryReportsBrokenPluginsAndContinues(t *testing.T) {
	dir := pluginDir(t, map[string]string{"anvil-driver-fake": bins.fake, "anvil-driver-future": bins.future})
	write := func(name, body string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("anvil-driver-text", "not a program\n", 0o644)
	write("anvil-driver-crashy", "#!/bin/sh\necho boom >&2\nexit 3\n", 0o755)
	write("README.md", "ignored: wrong prefix\n", 0o644)
	host := plugin.NewHost(plugin.HostConfig{Dirs: []string{dir, filepath.Join(dir, "missing")}})
	defer host.Close()
	rep, err := host.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Plugins) != 1 || rep.Plugins[0].Name() != "fake" {
		t.Fatalf("plugins = %v", rep.Plugins)
	}
	reasons := map[string]error{}
	for _, s := range rep.Skipped {
		reasons[filepath.Base(s.Path)] = s.Err
	}
	if len(reasons) != 4 {
		t.Fatalf("skipped = %v", rep.Err())
	}
	if !errors.Is(reasons["anvil-driver-text"], plugin.ErrNotAPlugin) {
		t.Errorf("text file: %v", reasons["anvil-driver-text"])
	}
	if err := reasons["anvil-driver-crashy"]; !errors.Is(err, plugin.ErrNotAPlugin) || !strings.Contains(err.Error(), "boom") {
		t.Errorf("crashy script: %v", err)
	}
	if !errors.Is(reasons["anvil-driver-future"], plugin.ErrProtocolVersion) {
		t.Errorf("future: %v", reasons["anvil-driver-future"])
	}
	if !errors.Is(reasons["missing"], os.ErrNotExist) {
		t.Errorf("missing dir: %v", reasons["missing"])
	}
}

func TestUnsupportedProtocolVersionIsRefused(t *testing.T) {
	dir := pluginDir(t, map[string]string{"anvil-driver-future": bins.future})
	host := plugin.NewHost(plugin.HostConfig{})
	defer host.Close()
	_, err := host.Load(context.Background(), filepath.Join(dir, "anvil-driver-future"))
	var pv *plugin.ProtocolVersionError
	if !errors.As(err, &pv) {
		t.Fatalf("Load = %v, want *ProtocolVersionError", err)
	}
	if pv.Plugin != "future" || len(pv.PluginVersions) != 2 || pv.PluginVersions[0] != 9 {
		t.Errorf("error fields = %+v", pv)
	}
	for _, frag := range []string{"plugin future", "host accepts [3 2]", "plugin speaks [9 8]"} {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("error %q lacks %q", err, frag)
		}
	}
	if len(host.Plugins()) != 0 {
		t.Error("refused plugin was kept")
	}
}

func TestPreviousProtocolVersionIsAccepted(t *testing.T) {
	dir := pluginDir(t, map[string]string{"anvil-driver-old": bins.old})
	var logs testlog.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	host := plugin.NewHost(plugin.HostConfig{Logger: logger})
	defer host.Close()
	p, err := host.Load(context.Background(), filepath.Join(dir, "anvil-driver-old"))
	if err != nil {
		t.Fatal(err)
	}
	if v := p.Status().ProtocolVersion; v != plugin.PreviousProtocolVersion {
		t.Errorf("negotiated version %d, want %d", v, plugin.PreviousProtocolVersion)
	}
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := host.Register(reg); err != nil {
		t.Fatal(err)
	}
	drv, err := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware})
	if err != nil {
		t.Fatal(err)
	}
	// Version 2 carries the step preparer and boot mode, not the
	// capabilities of version 3.
	if _, ok := driver.As[driver.StepPreparer](drv.Deploy()); !ok {
		t.Error("version-2 plugin lost StepPreparer")
	}
	m := drv.Management()
	if _, ok := driver.As[driver.BootModeManager](m); !ok {
		t.Error("version-2 plugin lost BootModeManager")
	}
	if _, ok := driver.As[driver.NMIInjector](m); ok {
		t.Error("version-2 plugin offered NMIInjector, which needs protocol 3")
	}
	if _, ok := driver.As[driver.IndicatorManager](m); ok {
		t.Error("version-2 plugin offered IndicatorManager, which needs protocol 3")
	}
	if _, ok := driver.As[driver.SecureBootManager](m); ok {
		t.Error("version-2 plugin offered SecureBootManager, which needs protocol 3")
	}
	if _, ok := driver.As[driver.SensorReader](m); ok {
		t.Error("version-2 plugin offered SensorReader, which needs protocol 3")
	}
	task := newTask()
	if err := drv.Power().SetPowerState(context.Background(), task, driver.PowerOn, 0); err != nil {
		t.Fatal(err)
	}
	// This plugin also writes to stdout once serving: the host turns that
	// into a warning instead of corrupting anything.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "stray line on stdout") {
		if time.Now().After(deadline) {
			t.Fatalf("no warning for the plugin's stdout write; host log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), `"level":"WARN"`) || !strings.Contains(logs.String(), "plugin wrote to stdout") {
		t.Errorf("stdout write not logged as a warning:\n%s", logs.String())
	}
}

func TestChecksumPinning(t *testing.T) {
	data, err := os.ReadFile(bins.fake)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	dir := pluginDir(t, map[string]string{"anvil-driver-fake": bins.fake})
	path := filepath.Join(dir, "anvil-driver-fake")

	bad := plugin.NewHost(plugin.HostConfig{Pins: map[string]string{"anvil-driver-fake": strings.Repeat("0", 64)}})
	defer bad.Close()
	_, err = bad.Load(context.Background(), path)
	var ce *plugin.ChecksumError
	if !errors.As(err, &ce) || ce.Got != hex.EncodeToString(sum[:]) || !errors.Is(err, plugin.ErrChecksumMismatch) {
		t.Errorf("wrong pin: %v", err)
	}

	good := plugin.NewHost(plugin.HostConfig{Pins: map[string]string{path: hex.EncodeToString(sum[:])}})
	defer good.Close()
	if _, err := good.Load(context.Background(), path); err != nil {
		t.Errorf("right pin: %v", err)
	}
}

func TestPluginLogsAreRelevelledIntoHostLogger(t *testing.T) {
	var buf testlog.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
	host, _ := loadFake(t, plugin.HostConfig{Logger: logger})
	host.Close()
	out := buf.String()
	// go-plugin's server logs "plugin address" at debug through the
	// plugin's hclog JSON logger on stderr; the host re-levels it.
	var found bool
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `"msg":"plugin address"`) && strings.Contains(line, `"level":"DEBUG"`) && strings.Contains(line, "anvil-driver-fake") {
			found = true
		}
	}
	if !found {
		t.Errorf("no re-levelled plugin debug line in host log:\n%s", out)
	}
	if !strings.Contains(out, `"msg":"driver plugin loaded"`) {
		t.Errorf("host did not log the load:\n%s", out)
	}
}

func TestSIGKILLDuringCall(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	host, reg := loadFake(t, plugin.HostConfig{})
	drv, err := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware})
	if err != nil {
		t.Fatal(err)
	}
	p := host.Plugins()[0]
	pid := p.Status().PID
	if pid == 0 {
		t.Fatal("no child PID")
	}

	slowTask := newTask()
	slowTask.DriverInfo[fake.DelayKey] = "30s"
	errc := make(chan error, 1)
	go func() {
		// A reboot is not repeated after a crash (it may have reached the
		// BMC): the caller sees the crash.
		errc <- drv.Power().Reboot(context.Background(), slowTask, 0)
	}()
	time.Sleep(200 * time.Millisecond) // let the call reach the plugin
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if took := time.Since(killed); took > time.Second {
			t.Errorf("call failed %v after the kill, want < 1s", took)
		}
		var crash *plugin.CrashError
		if !errors.As(err, &crash) || !errors.Is(err, plugin.ErrPluginCrashed) || crash.Plugin != "fake" {
			t.Errorf("in-flight call error = %v, want *CrashError naming the plugin", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("in-flight call did not fail after SIGKILL")
	}
	if st := p.Status(); st.Healthy {
		t.Errorf("plugin still healthy after crash: %+v", st)
	}

	// The next call restarts the plugin and succeeds.
	state, err := drv.Power().GetPowerState(context.Background(), newTask())
	if err != nil || state != driver.PowerOff {
		t.Fatalf("call after restart = %q, %v", state, err)
	}
	st := p.Status()
	if !st.Healthy || st.Restarts != 1 || st.PID == pid || st.PID == 0 {
		t.Errorf("status after restart = %+v", st)
	}
	newPID := st.PID

	if err := host.Close(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int{pid, newPID} {
		if processAlive(id) {
			t.Errorf("plugin process %d still alive after Close", id)
		}
	}
	if _, err := drv.Power().GetPowerState(context.Background(), newTask()); !errors.Is(err, plugin.ErrHostClosed) {
		t.Errorf("call after Close = %v", err)
	}
}

// TestSIGKILLDuringIdempotentCall kills the plugin while it serves a
// call that is safe to repeat (setting the power state): the host sends
// it again to the process it starts in its place, and the caller sees
// success.
func TestSIGKILLDuringIdempotentCall(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	logs := &testlog.Buffer{}
	host, reg := loadFake(t, plugin.HostConfig{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	defer host.Close() // before goleak's check; the cleanup's Close is then a no-op
	drv, err := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware})
	if err != nil {
		t.Fatal(err)
	}
	p := host.Plugins()[0]
	pid := p.Status().PID
	slowTask := newTask()
	slowTask.DriverInfo[fake.DelayKey] = "1s"
	errc := make(chan error, 1)
	go func() { errc <- drv.Power().SetPowerState(context.Background(), slowTask, driver.PowerOn, 0) }()
	time.Sleep(200 * time.Millisecond) // let the call reach the plugin
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("set_power_state across the crash: %v, want success on the new process", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("set_power_state did not return")
	}
	if st, _ := slowTask.InternalString(fake.PowerStateKey); st != string(driver.PowerOn) {
		t.Errorf("power state after the repeated call: %q, want %q", st, driver.PowerOn)
	}
	if st := p.Status(); !st.Healthy || st.Restarts != 1 || st.PID == pid {
		t.Errorf("status after the repeated call = %+v", st)
	}
	if !strings.Contains(logs.String(), "safe to repeat") {
		t.Errorf("the host did not log the repeated call:\n%s", logs.String())
	}
}

func TestRestartBackoff(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	dir := t.TempDir()
	path := filepath.Join(dir, "anvil-driver-fake")
	data, err := os.ReadFile(bins.fake)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	host := plugin.NewHost(plugin.HostConfig{Dirs: []string{dir}, Now: clock, MinBackoff: time.Minute, MaxBackoff: 4 * time.Minute})
	defer host.Close()
	if _, err := host.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := host.Register(reg); err != nil {
		t.Fatal(err)
	}
	drv, _ := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware})
	p := host.Plugins()[0]

	// Kill the plugin and remove its binary: the restart fails.
	if err := syscall.Kill(p.Status().PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".gone"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var err1 error
	for range 50 { // the first call may still see the dying connection
		_, err1 = drv.Power().GetPowerState(ctx, newTask())
		if errors.Is(err1, plugin.ErrPluginBackoff) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var ue *plugin.BackoffError
	if !errors.As(err1, &ue) || ue.Plugin != "fake" || !ue.RetryAt.After(now) {
		t.Fatalf("restart of a missing binary = %v", err1)
	}
	failures := p.Status().Failures
	// Before RetryAt nothing is tried: the failure count stays.
	_, err = drv.Power().GetPowerState(ctx, newTask())
	if !errors.Is(err, plugin.ErrPluginBackoff) || p.Status().Failures != failures {
		t.Errorf("call during backoff = %v (failures %d -> %d)", err, failures, p.Status().Failures)
	}
	// Bring the binary back and move past the backoff: the call succeeds.
	if err := os.Rename(path+".gone", path); err != nil {
		t.Fatal(err)
	}
	now = ue.RetryAt.Add(time.Second)
	if _, err := drv.Power().GetPowerState(ctx, newTask()); err != nil {
		t.Fatalf("call after backoff = %v", err)
	}
	if st := p.Status(); !st.Healthy || st.Failures != 0 {
		t.Errorf("status after recovery = %+v", st)
	}
}

// processAlive reports whether pid is a live (not zombie) process.
func processAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no procfs: best effort
	}
	// The state follows the parenthesised command name.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestPluginDiesWithHost(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signal is Linux only")
	}
	dir := pluginDir(t, map[string]string{"anvil-driver-fake": bins.fake})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hostModeEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscanf(bufio.NewReader(out), "pid %d\n", &pid); err != nil || pid == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("reading plugin pid from host: %v", err)
	}
	if !processAlive(pid) {
		t.Fatalf("plugin %d died before its host", pid)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no Close, no cleanup
		t.Fatal(err)
	}
	cmd.Wait()
	deadline := time.Now().Add(3 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("plugin %d outlived its SIGKILLed host by 3s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testManagementCapabilities exercises the fake management's optional
// capabilities through m (a plugin proxy).
func testManagementCapabilities(ctx context.Context, t *testing.T, m driver.ManagementInterface, task *driver.Task) {
	t.Helper()
	nmi, ok := driver.As[driver.NMIInjector](m)
	if !ok {
		t.Fatal("management proxy lacks NMIInjector")
	}
	if err := nmi.InjectNMI(ctx, task); err != nil {
		t.Fatal(err)
	}
	if n, _ := task.DriverInternalInfo[fake.NMICountKey].(float64); n != 1 {
		t.Errorf("nmi count = %v, want 1", task.DriverInternalInfo[fake.NMICountKey])
	}
	ind, ok := driver.As[driver.IndicatorManager](m)
	if !ok {
		t.Fatal("management proxy lacks IndicatorManager")
	}
	if err := ind.SetIndicatorState(ctx, task, driver.IndicatorBlinking); err != nil {
		t.Fatal(err)
	}
	if s, err := ind.GetIndicatorState(ctx, task); err != nil || s != driver.IndicatorBlinking {
		t.Errorf("indicator = %q, %v; want blinking", s, err)
	}
	var inval *driver.InvalidParameterError
	if err := ind.SetIndicatorState(ctx, task, "purple"); !errors.As(err, &inval) || inval.Key != "state" {
		t.Errorf("bad indicator state = %v", err)
	}
	sb, ok := driver.As[driver.SecureBootManager](m)
	if !ok {
		t.Fatal("management proxy lacks SecureBootManager")
	}
	if err := sb.SetSecureBootState(ctx, task, true); err != nil {
		t.Fatal(err)
	}
	if on, err := sb.GetSecureBootState(ctx, task); err != nil || !on {
		t.Errorf("secure boot = %v, %v; want true", on, err)
	}
	sr, ok := driver.As[driver.SensorReader](m)
	if !ok {
		t.Fatal("management proxy lacks SensorReader")
	}
	r, err := sr.Sensors(ctx, task)
	if err != nil || len(r) != 2 || r[0].Type != driver.SensorTemperature || r[0].Value == nil || *r[0].Value != 38 {
		t.Errorf("sensors = %+v, %v", r, err)
	}
}

// TestNilLoggerLogsToSlogDefault leaves HostConfig.Logger nil: the host's
// own lines reach slog.Default(), as everywhere an embedder configures
// logging, instead of being discarded.
func TestNilLoggerLogsToSlogDefault(t *testing.T) {
	var buf testlog.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	host, _ := loadFake(t, plugin.HostConfig{})
	host.Close()
	if !strings.Contains(buf.String(), `"msg":"driver plugin loaded"`) {
		t.Errorf("slog.Default() got no host line from a nil Logger:\n%s", buf.String())
	}
}
