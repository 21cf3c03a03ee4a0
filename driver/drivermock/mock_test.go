package drivermock_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/mock/gomock"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/drivermock"
	"github.com/anvilmetal/anvil/driver/fake"
)

// Interface guards: every mock satisfies its driver interface.
var (
	_ driver.Interface            = (*drivermock.MockInterface)(nil)
	_ driver.PowerInterface       = (*drivermock.MockPowerInterface)(nil)
	_ driver.ManagementInterface  = (*drivermock.MockManagementInterface)(nil)
	_ driver.BootModeManager      = (*drivermock.MockBootModeManager)(nil)
	_ driver.BootInterface        = (*drivermock.MockBootInterface)(nil)
	_ driver.DeployInterface      = (*drivermock.MockDeployInterface)(nil)
	_ driver.StepPreparer         = (*drivermock.MockStepPreparer)(nil)
	_ driver.InspectInterface     = (*drivermock.MockInspectInterface)(nil)
	_ driver.BIOSInterface        = (*drivermock.MockBIOSInterface)(nil)
	_ driver.RAIDInterface        = (*drivermock.MockRAIDInterface)(nil)
	_ driver.ConsoleInterface     = (*drivermock.MockConsoleInterface)(nil)
	_ driver.VendorInterface      = (*drivermock.MockVendorInterface)(nil)
	_ driver.RescueInterface      = (*drivermock.MockRescueInterface)(nil)
	_ driver.FirmwareInterface    = (*drivermock.MockFirmwareInterface)(nil)
	_ driver.NetworkInterface     = (*drivermock.MockNetworkInterface)(nil)
	_ driver.StorageInterface     = (*drivermock.MockStorageInterface)(nil)
	_ driver.StepProvider         = (*drivermock.MockStepProvider)(nil)
	_ driver.StepRunner           = (*drivermock.MockStepRunner)(nil)
	_ driver.NMIInjector          = (*drivermock.MockNMIInjector)(nil)
	_ driver.IndicatorManager     = (*drivermock.MockIndicatorManager)(nil)
	_ driver.SecureBootManager    = (*drivermock.MockSecureBootManager)(nil)
	_ driver.SensorReader         = (*drivermock.MockSensorReader)(nil)
	_ driver.VirtualMediaManager  = (*drivermock.MockVirtualMediaManager)(nil)
	_ driver.AvailabilityReporter = (*drivermock.MockAvailabilityReporter)(nil)
)

// TestMockCapabilities uses the capability mocks as a conductor would:
// a sensor read, and an availability check that reports a missing tool.
func TestMockCapabilities(t *testing.T) {
	ctrl := gomock.NewController(t)
	sensors := drivermock.NewMockSensorReader(ctrl)
	v := 41.5
	sensors.EXPECT().Sensors(gomock.Any(), gomock.Any()).Return([]driver.SensorReading{{Name: "CPU", Type: driver.SensorTemperature, Value: &v}}, nil)
	r, err := sensors.Sensors(context.Background(), &driver.Task{NodeUUID: "n1"})
	if err != nil || len(r) != 1 || *r[0].Value != 41.5 {
		t.Fatalf("sensors %+v %v", r, err)
	}
	avail := drivermock.NewMockAvailabilityReporter(ctrl)
	avail.EXPECT().Unavailable().Return(&driver.UnavailableError{Kind: driver.KindPower, Impl: "mock", Reason: "tool missing"})
	if err := avail.Unavailable(); !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("unavailable %v", err)
	}
}

// TestMockInRegistry composes a mock power interface into a node's driver,
// the way an embedder unit-tests conductor code against a BMC failure.
func TestMockInRegistry(t *testing.T) {
	ctrl := gomock.NewController(t)
	power := drivermock.NewMockPowerInterface(ctrl)
	bmcDown := errors.New("bmc unreachable")
	power.EXPECT().GetPowerState(gomock.Any(), gomock.Any()).Return(driver.PowerOn, nil)
	power.EXPECT().SetPowerState(gomock.Any(), gomock.Any(), driver.PowerOff, gomock.Any()).Return(bmcDown)

	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces:    map[driver.Kind][]string{driver.KindPower: {"mock"}},
	})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindPower, "mock", power); err != nil {
		t.Fatal(err)
	}
	// fake-hardware accepts any enabled implementation, so the node names it.
	drv, err := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware, Interfaces: map[driver.Kind]string{driver.KindPower: "mock"}})
	if err != nil {
		t.Fatal(err)
	}
	task := &driver.Task{NodeUUID: "n1"}
	if s, err := drv.Power().GetPowerState(context.Background(), task); err != nil || s != driver.PowerOn {
		t.Errorf("GetPowerState = %q, %v", s, err)
	}
	if err := drv.Power().SetPowerState(context.Background(), task, driver.PowerOff, 0); !errors.Is(err, bmcDown) {
		t.Errorf("SetPowerState = %v", err)
	}
}
