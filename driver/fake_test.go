package driver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/steps"
)

func newTask() *driver.Task {
	return &driver.Task{NodeUUID: "6f2b1c8e-1d8a-4a51-9c55-0d5d3c9e7a10", HardwareType: driver.FakeHardware,
		DriverInfo: map[string]any{"ipmi_password": "hunter2", "ipmi_address": "10.0.0.1"}}
}

func TestFakePowerStateSurvivesInDriverInternalInfo(t *testing.T) {
	ctx := context.Background()
	p := driver.NewFakePower(driver.FakeConfig{})
	task := newTask()
	if s, err := p.GetPowerState(ctx, task); err != nil || s != driver.PowerOff {
		t.Fatalf("initial state = %q, %v", s, err)
	}
	if err := p.SetPowerState(ctx, task, driver.PowerOn, 0); err != nil {
		t.Fatal(err)
	}
	// A new implementation (a restarted process) reading the persisted
	// changes sees the same state.
	fresh := newTask()
	fresh.DriverInternalInfo = task.Changes().DriverInternalInfo
	if s, _ := driver.NewFakePower(driver.FakeConfig{}).GetPowerState(ctx, fresh); s != driver.PowerOn {
		t.Errorf("state after restart = %q, want power on", s)
	}
	err := p.SetPowerState(ctx, task, "sideways", 0)
	var ip *driver.InvalidParameterError
	if !errors.As(err, &ip) || !strings.Contains(err.Error(), "sideways") {
		t.Errorf("bad target error = %v", err)
	}
}

func TestFakeInjectedFailuresAndDelays(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("bmc on fire")
	p := driver.NewFakePower(driver.FakeConfig{Failures: map[string]error{"power.reboot": boom}})
	task := newTask()
	if err := p.Reboot(ctx, task, 0); !errors.Is(err, driver.ErrInjectedFailure) || !errors.Is(err, boom) {
		t.Errorf("configured failure = %v", err)
	}
	task.DriverInfo[driver.FakeFailKey] = "power.get_power_state"
	if _, err := p.GetPowerState(ctx, task); !errors.Is(err, driver.ErrInjectedFailure) {
		t.Errorf("driver_info failure = %v", err)
	}
	if err := p.SetPowerState(ctx, task, driver.PowerOn, 0); err != nil {
		t.Errorf("unrelated op failed: %v", err)
	}

	var slept []time.Duration
	p = driver.NewFakePower(driver.FakeConfig{
		Delays: map[string]time.Duration{"*": time.Second},
		Sleep:  func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil },
	})
	if _, err := p.GetPowerState(ctx, newTask()); err != nil || len(slept) != 1 || slept[0] != time.Second {
		t.Errorf("injected sleep: %v %v", slept, err)
	}

	// A real delay honours cancellation.
	task = newTask()
	task.DriverInfo[driver.FakeDelayKey] = "10s"
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := driver.NewFakePower(driver.FakeConfig{}).GetPowerState(cctx, task); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled delay = %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Error("delay ignored cancellation")
	}
	task.DriverInfo[driver.FakeDelayKey] = "soon"
	if err := driver.NewFakePower(driver.FakeConfig{}).Validate(ctx, task); !errors.Is(err, driver.ErrInvalidParameter) {
		t.Errorf("bad fake_delay validate = %v", err)
	}
}

func TestFakeInspectRecordsPropertiesAndPort(t *testing.T) {
	task := newTask()
	res, err := driver.NewFakeInspect(driver.FakeConfig{}).InspectHardware(context.Background(), task)
	if err != nil || !res.Done() {
		t.Fatalf("inspect = %+v, %v", res, err)
	}
	c := task.Changes()
	if c.Properties["cpu_arch"] != "x86_64" || !c.PortsChanged || len(c.Ports) != 1 || c.Ports[0].Address != driver.FakeMAC(task.NodeUUID) {
		t.Errorf("changes = %+v", c)
	}
	if task.AddPort(driver.Port{Address: strings.ToUpper(c.Ports[0].Address)}) {
		t.Error("AddPort added a duplicate MAC")
	}
}

func TestTaskChangesAndApply(t *testing.T) {
	task := newTask()
	if !task.Changes().Empty() {
		t.Fatal("fresh task has changes")
	}
	task.SetDriverInternalInfo("a", 1.0)
	task.DeleteProperty("absent") // no-op: nothing changed
	c := task.Changes()
	if c.DriverInternalInfo["a"] != 1.0 || c.Properties != nil || c.DriverInfo != nil {
		t.Errorf("changes = %+v", c)
	}
	c.DriverInternalInfo["a"] = 2.0 // the returned maps are copies
	if task.DriverInternalInfo["a"] != 1.0 {
		t.Error("Changes returned the task's own map")
	}
	task.DeleteDriverInternalInfo("a")
	if c := task.Changes(); c.DriverInternalInfo == nil || len(c.DriverInternalInfo) != 0 {
		t.Errorf("emptied field must be an empty non-nil map, got %#v", c.DriverInternalInfo)
	}
	other := newTask()
	other.Apply(driver.Changes{Properties: map[string]any{"cpus": 8.0}, PortsChanged: true})
	if oc := other.Changes(); oc.Properties["cpus"] != 8.0 || !oc.PortsChanged || oc.DriverInternalInfo != nil {
		t.Errorf("applied changes = %+v", oc)
	}
}

func TestSecretsStayOutOfLogs(t *testing.T) {
	task := newTask()
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "task", task)
	out := b.String() + task.String() + fmt.Sprint(driver.Mask(task.DriverInfo))
	if strings.Contains(out, "hunter2") {
		t.Errorf("secret leaked: %s", out)
	}
	if !strings.Contains(out, "ipmi_password") || !strings.Contains(out, "10.0.0.1") {
		t.Errorf("expected keys and non-secret values: %s", out)
	}
}

func TestDriverStepsAndExecute(t *testing.T) {
	reg := newRegistry(t, driver.Config{EnabledHardwareTypes: []string{driver.FakeHardware}})
	drv, err := reg.Resolve(driver.NodeInterfaces{HardwareType: driver.FakeHardware})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range drv.Steps(steps.Clean) {
		names = append(names, s.Interface+"."+s.Name)
	}
	want := "bios.apply_configuration bios.factory_reset firmware.update raid.create_configuration raid.delete_configuration"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("clean steps = %s, want %s", got, want)
	}
	task := newTask()
	step := steps.Step{Interface: "bios", Name: "apply_configuration", Args: map[string]any{"settings": []any{map[string]any{"name": "X", "value": "1"}}}}
	if _, err := drv.ExecuteStep(context.Background(), task, steps.Clean, step); err != nil {
		t.Fatal(err)
	}
	settings, err := drv.BIOS().CacheBIOSSettings(context.Background(), task)
	if err != nil || len(settings) != 3 || settings[2].Name != "X" || settings[2].Value != "1" {
		t.Errorf("settings = %+v, %v", settings, err)
	}
	_, err = drv.ExecuteStep(context.Background(), task, steps.Clean, steps.Step{Interface: "power", Name: "explode"})
	if !errors.Is(err, driver.ErrStepNotFound) {
		t.Errorf("unknown step = %v", err)
	}
	if v := drv.Validate(context.Background(), task); v[driver.KindPower] != nil || len(v) != 13 {
		t.Errorf("validate = %v", v)
	}
}

func TestNoopImplementationsAreUnsupported(t *testing.T) {
	ctx := context.Background()
	for _, i := range []driver.Interface{driver.NewNoBIOS(), driver.NewNoRAID(), driver.NewNoConsole(), driver.NewNoVendor(), driver.NewNoRescue(), driver.NewNoFirmware(), driver.NewNoInspect()} {
		err := i.Validate(ctx, newTask())
		var u *driver.UnsupportedError
		if !errors.As(err, &u) || !errors.Is(err, driver.ErrUnsupported) {
			t.Errorf("%T.Validate = %v", i, err)
		}
	}
	if _, err := driver.NewNoVendor().Call(ctx, newTask(), "x", "POST", nil); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("no-vendor call = %v", err)
	}
}
