package drivertest_test

import (
	"context"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/drivertest"
	"github.com/anvilmetal/anvil/driver/fake"
)

func newTask() *driver.Task {
	return &driver.Task{NodeUUID: "0b1e7d4c-5e0a-4f59-8a43-3f1f4ad2c001", HardwareType: builtin.FakeHardware, DriverInfo: map[string]any{}}
}

func slow(t *driver.Task) { t.DriverInfo[fake.DelayKey] = "10s" }

// TestBuiltinsConform runs the suite against every built-in implementation
// in process, through a composed fake-hardware driver and one for the
// no-op and noop implementations.
func TestBuiltinsConform(t *testing.T) {
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindBIOS: {fake.Name, driver.NoBIOS}, driver.KindConsole: {fake.Name, driver.NoConsole},
			driver.KindFirmware: {fake.Name, driver.NoFirmware}, driver.KindInspect: {fake.Name, driver.NoInspect},
			driver.KindRAID: {fake.Name, driver.NoRAID}, driver.KindRescue: {fake.Name, driver.NoRescue},
			driver.KindVendor: {fake.Name, driver.NoVendor}, driver.KindNetwork: {driver.Noop, fake.Name},
			driver.KindStorage: {driver.Noop, fake.Name}, driver.KindManagement: {fake.Name, driver.Noop},
			driver.KindDeploy: {fake.Name, driver.Noop},
		},
	})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	fake, err := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware, Interfaces: map[driver.Kind]string{
		driver.KindNetwork: fake.Name, driver.KindStorage: fake.Name}})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("fake", func(t *testing.T) { drivertest.RunDriver(t, fake, newTask, slow) })
	noop, err := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware, Interfaces: map[driver.Kind]string{
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
type requiredPower struct{ *fake.Power }

func (requiredPower) Properties() []driver.Property {
	return []driver.Property{{Name: "bmc_address", Description: "BMC address.", Required: true}}
}

func (r requiredPower) Validate(ctx context.Context, t *driver.Task) error {
	if err := t.RequireDriverInfo(driver.KindPower, "required", r.Properties()); err != nil {
		return err
	}
	return r.Power.Validate(ctx, t)
}

func TestRequiredProperty(t *testing.T) {
	drivertest.Run(t, drivertest.Config{
		Kind: driver.KindPower, Name: "required", Impl: requiredPower{fake.NewPower(fake.Config{})},
		NewTask: func() *driver.Task {
			task := newTask()
			task.DriverInfo["bmc_address"] = "10.1.1.1"
			return task
		},
		Slow: slow,
	})
}
