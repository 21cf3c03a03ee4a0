// Package drivertest is a conformance suite for implementations of the
// package driver interfaces, built in or served by a plugin. Run it from a
// test with Run (one implementation) or RunDriver (every interface of a
// composed driver).
//
// The suite checks that an implementation describes its driver_info
// properties; that Validate rejects a node missing each required property
// with a *driver.MissingParameterError naming it; that power round-trips
// (on, off, reboot) and that the state a driver records survives a
// "restart" (a fresh Task built from the persisted changes); that its
// steps are well formed (name, interface, argsinfo, priorities) and that
// unknown steps are refused with driver.ErrStepNotFound; and that
// cancellation is honoured, at once for a cancelled context and within a
// second for a deadline hit during a slow operation.
//
// # Usage
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, drivertest.Config{
//			Kind:    driver.KindPower,
//			Name:    "acme",
//			Impl:    acme.NewPower(),
//			NewTask: func() *driver.Task { return &driver.Task{NodeUUID: "n1", DriverInfo: map[string]any{"acme_address": "10.0.0.9"}} },
//		})
//	}
package drivertest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/steps"
)

// Config describes the implementation under test.
type Config struct {
	Kind driver.Kind
	Name string
	Impl driver.Interface
	// NewTask returns a task that is valid for Impl (all required
	// driver_info present). It is called once per check.
	NewTask func() *driver.Task
	// Slow, when set, makes every later operation on the task slow (for
	// the fakes: driver_info fake_delay), so that the suite can check that
	// a deadline interrupts an operation in flight.
	Slow func(*driver.Task)
}

// Run runs every check that applies to c.Impl as subtests of t.
func Run(t *testing.T, c Config) {
	t.Helper()
	if c.Impl == nil || c.NewTask == nil || !c.Kind.Valid() {
		t.Fatalf("drivertest: Config needs a valid Kind, an Impl and NewTask (got kind %q)", c.Kind)
	}
	unsupported := errors.Is(c.Impl.Validate(context.Background(), c.NewTask()), driver.ErrUnsupported)
	t.Run("Properties", func(t *testing.T) { checkProperties(t, c) })
	t.Run("Validate", func(t *testing.T) { checkValidate(t, c, unsupported) })
	t.Run("Steps", func(t *testing.T) { checkSteps(t, c) })
	if p, ok := c.Impl.(driver.PowerInterface); ok && !unsupported {
		t.Run("PowerRoundTrip", func(t *testing.T) { checkPower(t, c, p) })
	}
	t.Run("Cancellation", func(t *testing.T) { checkCancel(t, c, unsupported) })
}

// RunDriver runs Run for every interface of d, with one subtest per kind.
func RunDriver(t *testing.T, d *driver.Driver, newTask func() *driver.Task, slow func(*driver.Task)) {
	t.Helper()
	for _, k := range driver.Kinds() {
		impl := d.Interface(k)
		if impl == nil {
			continue
		}
		t.Run(string(k)+"/"+d.Names[k], func(t *testing.T) {
			Run(t, Config{Kind: k, Name: d.Names[k], Impl: impl, NewTask: newTask, Slow: slow})
		})
	}
}

func checkProperties(t *testing.T, c Config) {
	seen := map[string]bool{}
	for _, p := range c.Impl.Properties() {
		if p.Name == "" {
			t.Errorf("%s/%s: a property has no name", c.Kind, c.Name)
		}
		if p.Description == "" {
			t.Errorf("%s/%s: property %q has no description", c.Kind, c.Name, p.Name)
		}
		if seen[p.Name] {
			t.Errorf("%s/%s: property %q described twice", c.Kind, c.Name, p.Name)
		}
		seen[p.Name] = true
	}
}

func checkValidate(t *testing.T, c Config, unsupported bool) {
	ctx := context.Background()
	err := c.Impl.Validate(ctx, c.NewTask())
	if unsupported {
		var u *driver.UnsupportedError
		if !errors.As(err, &u) {
			t.Errorf("%s/%s: unsupported Validate must return *driver.UnsupportedError, got %T %v", c.Kind, c.Name, err, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s/%s: Validate of a valid task: %v", c.Kind, c.Name, err)
	}
	for _, p := range c.Impl.Properties() {
		if !p.Required {
			continue
		}
		task := c.NewTask()
		delete(task.DriverInfo, p.Name)
		err := c.Impl.Validate(ctx, task)
		var miss *driver.MissingParameterError
		if !errors.As(err, &miss) || !slices.Contains(miss.Missing, p.Name) {
			t.Errorf("%s/%s: Validate without required %q = %v, want *driver.MissingParameterError naming it", c.Kind, c.Name, p.Name, err)
			continue
		}
		if !errors.Is(err, driver.ErrMissingParameter) {
			t.Errorf("%s/%s: missing-parameter error does not match driver.ErrMissingParameter", c.Kind, c.Name)
		}
	}
}

func checkSteps(t *testing.T, c Config) {
	sp, ok := driver.As[driver.StepProvider](c.Impl)
	if !ok {
		return
	}
	r, canRun := driver.As[driver.StepRunner](c.Impl)
	for _, kind := range []steps.Kind{steps.Clean, steps.Deploy, steps.Service, steps.Verify} {
		names := map[string]bool{}
		list := sp.Steps(kind)
		if len(list) > 0 && !canRun {
			t.Errorf("%s/%s: declares %s steps but is not a driver.StepRunner", c.Kind, c.Name, kind)
		}
		for _, s := range list {
			if s.Name == "" {
				t.Errorf("%s/%s: a %s step has no name", c.Kind, c.Name, kind)
			}
			if names[s.Name] {
				t.Errorf("%s/%s: %s step %q declared twice", c.Kind, c.Name, kind, s.Name)
			}
			names[s.Name] = true
			if s.Interface != string(c.Kind) {
				t.Errorf("%s/%s: %s step %q has interface %q, want %q", c.Kind, c.Name, kind, s.Name, s.Interface, c.Kind)
			}
			if (kind == steps.Deploy || kind == steps.Verify) && s.Priority < 0 {
				t.Errorf("%s/%s: %s step %q has negative priority %d", c.Kind, c.Name, kind, s.Name, s.Priority)
			}
			for arg, info := range s.ArgsInfo {
				if arg == "" || info.Description == "" {
					t.Errorf("%s/%s: %s step %q: argument %q needs a name and a description", c.Kind, c.Name, kind, s.Name, arg)
				}
			}
		}
		if canRun {
			_, err := r.ExecuteStep(context.Background(), c.NewTask(), kind, steps.Step{Interface: string(c.Kind), Name: "drivertest_no_such_step"})
			if !errors.Is(err, driver.ErrStepNotFound) {
				t.Errorf("%s/%s: unknown %s step error = %v, want driver.ErrStepNotFound", c.Kind, c.Name, kind, err)
			}
		}
	}
}

func checkPower(t *testing.T, c Config, p driver.PowerInterface) {
	ctx := context.Background()
	task := c.NewTask()
	for _, step := range []struct {
		do   func() error
		want driver.PowerState
		what string
	}{
		{func() error { return p.SetPowerState(ctx, task, driver.PowerOn, 0) }, driver.PowerOn, "power on"},
		{func() error { return p.SetPowerState(ctx, task, driver.PowerOff, 0) }, driver.PowerOff, "power off"},
		{func() error { return p.Reboot(ctx, task, 0) }, driver.PowerOn, "reboot"},
		{func() error { return p.SetPowerState(ctx, task, driver.SoftPowerOff, 0) }, driver.PowerOff, "soft power off"},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s/%s: %s: %v", c.Kind, c.Name, step.what, err)
		}
		got, err := p.GetPowerState(ctx, task)
		if err != nil || got != step.want {
			t.Fatalf("%s/%s: after %s, power state = %q, %v; want %q", c.Kind, c.Name, step.what, got, err, step.want)
		}
	}
	if err := p.SetPowerState(ctx, task, driver.PowerOn, 0); err != nil {
		t.Fatal(err)
	}
	// Stateless: a fresh task carrying only the persisted changes reads
	// the same state, as after a restart of the process holding p.
	fresh := c.NewTask()
	fresh.Apply(task.Changes())
	if got, err := p.GetPowerState(ctx, fresh); err != nil || got != driver.PowerOn {
		t.Errorf("%s/%s: power state from persisted changes = %q, %v; want %q", c.Kind, c.Name, got, err, driver.PowerOn)
	}
}

func checkCancel(t *testing.T, c Config, unsupported bool) {
	if unsupported {
		return // every method refuses at once; nothing to cancel
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Impl.Validate(ctx, c.NewTask()); !errors.Is(err, context.Canceled) {
		t.Errorf("%s/%s: Validate with a cancelled context = %v, want context.Canceled", c.Kind, c.Name, err)
	}
	if c.Slow == nil {
		return
	}
	task := c.NewTask()
	c.Slow(task)
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	start := time.Now()
	err := slowOperation(dctx, c.Impl, task)
	if took := time.Since(start); took > time.Second {
		t.Errorf("%s/%s: slow operation took %v after its 50ms deadline", c.Kind, c.Name, took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s/%s: slow operation past its deadline = %v, want context.DeadlineExceeded", c.Kind, c.Name, err)
	}
}

// slowOperation calls one read-only operation of impl's kind.
func slowOperation(ctx context.Context, impl driver.Interface, t *driver.Task) error {
	switch i := impl.(type) {
	case driver.PowerInterface:
		_, err := i.GetPowerState(ctx, t)
		return err
	case driver.ManagementInterface:
		_, err := i.GetBootDevice(ctx, t)
		return err
	case driver.ConsoleInterface:
		_, err := i.GetConsole(ctx, t)
		return err
	case driver.BIOSInterface:
		_, err := i.CacheBIOSSettings(ctx, t)
		return err
	case driver.FirmwareInterface:
		_, err := i.CacheFirmwareComponents(ctx, t)
		return err
	case driver.StorageInterface:
		_, err := i.ShouldWriteImage(ctx, t)
		return err
	}
	return impl.Validate(ctx, t)
}
