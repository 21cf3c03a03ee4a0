package fake_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
)

func newTask() *driver.Task {
	return &driver.Task{NodeUUID: "6f2b1c8e-1d8a-4a51-9c55-0d5d3c9e7a10", HardwareType: builtin.FakeHardware,
		DriverInfo: map[string]any{"ipmi_password": "hunter2", "ipmi_address": "10.0.0.1"}}
}

func TestFakePowerStateSurvivesInDriverInternalInfo(t *testing.T) {
	ctx := context.Background()
	p := fake.NewPower(fake.Config{})
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
	if s, _ := fake.NewPower(fake.Config{}).GetPowerState(ctx, fresh); s != driver.PowerOn {
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
	p := fake.NewPower(fake.Config{Failures: map[string]error{"power.reboot": boom}})
	task := newTask()
	if err := p.Reboot(ctx, task, 0); !errors.Is(err, driver.ErrInjectedFailure) || !errors.Is(err, boom) {
		t.Errorf("configured failure = %v", err)
	}
	task.DriverInfo[fake.FailKey] = "power.get_power_state"
	if _, err := p.GetPowerState(ctx, task); !errors.Is(err, driver.ErrInjectedFailure) {
		t.Errorf("driver_info failure = %v", err)
	}
	if err := p.SetPowerState(ctx, task, driver.PowerOn, 0); err != nil {
		t.Errorf("unrelated op failed: %v", err)
	}

	var slept []time.Duration
	p = fake.NewPower(fake.Config{
		Delays: map[string]time.Duration{"*": time.Second},
		Sleep:  func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil },
	})
	if _, err := p.GetPowerState(ctx, newTask()); err != nil || len(slept) != 1 || slept[0] != time.Second {
		t.Errorf("injected sleep: %v %v", slept, err)
	}

	// A real delay honours cancellation.
	task = newTask()
	task.DriverInfo[fake.DelayKey] = "10s"
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := fake.NewPower(fake.Config{}).GetPowerState(cctx, task); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled delay = %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Error("delay ignored cancellation")
	}
	task.DriverInfo[fake.DelayKey] = "soon"
	if err := fake.NewPower(fake.Config{}).Validate(ctx, task); !errors.Is(err, driver.ErrInvalidParameter) {
		t.Errorf("bad fake_delay validate = %v", err)
	}
}

func TestFakeInspectRecordsPropertiesAndPort(t *testing.T) {
	task := newTask()
	res, err := fake.NewInspect(fake.Config{}).InspectHardware(context.Background(), task)
	if err != nil || !res.Done() {
		t.Fatalf("inspect = %+v, %v", res, err)
	}
	c := task.Changes()
	if c.Properties["cpu_arch"] != "x86_64" || !c.PortsChanged || len(c.Ports) != 1 || c.Ports[0].Address != fake.MAC(task.NodeUUID) {
		t.Errorf("changes = %+v", c)
	}
	if task.AddPort(driver.Port{Address: strings.ToUpper(c.Ports[0].Address)}) {
		t.Error("AddPort added a duplicate MAC")
	}
}

// TestFakeConsoleReportsOnlyAStartedConsole walks the fake console
// through start, get and stop: only a started console has an address,
// the state survives in driver_internal_info (a restarted process reads
// it back), and a stop makes GetConsole refuse again.
func TestFakeConsoleReportsOnlyAStartedConsole(t *testing.T) {
	ctx := context.Background()
	c := fake.NewConsole(fake.Config{})
	task := newTask()
	if _, err := c.GetConsole(ctx, task); !errors.Is(err, fake.ErrConsoleNotStarted) {
		t.Fatalf("GetConsole before start = %v, want ErrConsoleNotStarted", err)
	}
	if err := c.StartConsole(ctx, task); err != nil {
		t.Fatal(err)
	}
	fresh := newTask()
	fresh.DriverInternalInfo = task.Changes().DriverInternalInfo
	info, err := c.GetConsole(ctx, fresh)
	if err != nil || info.Type != "fake" || info.URL != "fake://console/"+task.NodeUUID {
		t.Fatalf("GetConsole after start = %+v, %v", info, err)
	}
	if err := c.StopConsole(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetConsole(ctx, fresh); !errors.Is(err, fake.ErrConsoleNotStarted) {
		t.Errorf("GetConsole after stop = %v, want ErrConsoleNotStarted", err)
	}
}
