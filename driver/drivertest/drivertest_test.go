package drivertest_test

import (
	"context"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/drivertest"
)

func newTask() *driver.Task {
	return &driver.Task{NodeUUID: "0b1e7d4c-5e0a-4f59-8a43-3f1f4ad2c001", HardwareType: driver.FakeHardware, DriverInfo: map[string]any{}}
}

func slow(t *driver.Task) { t.DriverInfo[driver.FakeDelayKey] = "10s" }

// TestBuiltinsConform runs the suite against every built-in implementation
// in process, through a composed fake-hardware driver and one for the
// no-op and noop implementations.
func TestBuiltinsConform(t *testing.T) {
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{driver.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindBIOS: {driver.Fake, driver.NoBIOS}, driver.KindConsole: {driver.Fake, driver.NoConsole},
			driver.KindFirmware: {driver.Fake, driver.NoFirmware}, driver.KindInspect: {driver.Fake, driver.NoInspect},
			driver.KindRAID: {driver.Fake, driver.NoRAID}, driver.KindRescue: {driver.Fake, driver.NoRescue},
			driver.KindVendor: {driver.Fake, driver.NoVendor}, driver.KindNetwork: {driver.Noop, driver.Fake},
			driver.KindStorage: {driver.Noop, driver.Fake}, driver.KindManagement: {driver.Fake, driver.Noop},
			driver.KindDeploy: {driver.Fake, driver.Noop},
		},
	})
	if err := reg.Register(driver.Builtins(driver.FakeConfig{})); err != nil {
		t.Fatal(err)
	}
	fake, err := reg.Resolve(driver.NodeInterfaces{HardwareType: driver.FakeHardware, Interfaces: map[driver.Kind]string{
		driver.KindNetwork: driver.Fake, driver.KindStorage: driver.Fake}})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("fake", func(t *testing.T) { drivertest.RunDriver(t, fake, newTask, slow) })
	noop, err := reg.Resolve(driver.NodeInterfaces{HardwareType: driver.FakeHardware, Interfaces: map[driver.Kind]string{
		driver.KindBIOS: driver.NoBIOS, driver.KindConsole: driver.NoConsole, driver.KindFirmware: driver.NoFirmware,
		driver.KindInspect: driver.NoInspect, driver.KindRAID: driver.NoRAID, driver.KindRescue: driver.NoRescue,
		driver.KindVendor: driver.NoVendor, driver.KindManagement: driver.Noop, driver.KindDeploy: driver.Noop,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("noop", func(t *testing.T) { drivertest.RunDriver(t, noop, newTask, nil) })
}

// requiredPower is a power implementation with a required property, to
// show the suite's Validate check catching a missing one.
type requiredPower struct{ *driver.FakePower }

func (requiredPower) Properties() []driver.Property {
	return []driver.Property{{Name: "bmc_address", Description: "BMC address.", Required: true}}
}

func (r requiredPower) Validate(ctx context.Context, t *driver.Task) error {
	if err := t.RequireDriverInfo(driver.KindPower, "required", r.Properties()); err != nil {
		return err
	}
	return r.FakePower.Validate(ctx, t)
}

func TestRequiredProperty(t *testing.T) {
	drivertest.Run(t, drivertest.Config{
		Kind: driver.KindPower, Name: "required", Impl: requiredPower{driver.NewFakePower(driver.FakeConfig{})},
		NewTask: func() *driver.Task {
			task := newTask()
			task.DriverInfo["bmc_address"] = "10.1.1.1"
			return task
		},
		Slow: slow,
	})
}
