package drivermock_test

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/mock/gomock"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/drivermock"
	"github.com/anvilmetal/anvil/driver/fake"
)

// printReporter stands in for the *testing.T a test hands to
// gomock.NewController: an unexpected call is printed, so it shows in the
// example's output.
type printReporter struct{}

func (printReporter) Errorf(format string, args ...any) { fmt.Printf("mock: "+format+"\n", args...) }
func (printReporter) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// This example scripts a BMC whose credentials are revoked between two
// power reads, a sequence no fake produces: the first read answers
// "power on", the second a *driver.BMCAuthError with the fields a caller
// reports. The mock serves the power interface of a custom hardware type
// through a driver.Registry, as the conductor would resolve it for a node.
func Example_revokedCredentials() {
	ctrl := gomock.NewController(printReporter{}) // in a test: gomock.NewController(t)
	defer ctrl.Finish()                           // fails on an expected call never made
	power := drivermock.NewMockPowerInterface(ctrl)
	gomock.InOrder(
		power.EXPECT().GetPowerState(gomock.Any(), gomock.Any()).Return(driver.PowerOn, nil),
		power.EXPECT().GetPowerState(gomock.Any(), gomock.Any()).DoAndReturn(
			func(_ context.Context, t *driver.Task) (driver.PowerState, error) {
				return "", &driver.BMCAuthError{Node: t.NodeUUID, Kind: driver.KindPower, Impl: "acme",
					Address: "192.0.2.10:623", Username: "admin", Detail: "session rejected"}
			}),
	)

	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{"acme"}})
	// The built-ins provide the boot, deploy, management and no-op
	// interfaces the hardware type needs besides power.
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		fmt.Println(err)
		return
	}
	if err := reg.RegisterHardwareType(driver.HardwareType{Name: "acme", Supported: map[driver.Kind][]string{
		driver.KindPower: {"acme"}, driver.KindManagement: {driver.Noop},
		driver.KindBoot: {fake.Name}, driver.KindDeploy: {driver.Noop},
	}}); err != nil {
		fmt.Println(err)
		return
	}
	if err := reg.RegisterInterface(driver.KindPower, "acme", power); err != nil {
		fmt.Println(err)
		return
	}
	drv, err := reg.Resolve(driver.NodeInterfaces{HardwareType: "acme"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("power interface:", drv.Names[driver.KindPower])

	task := &driver.Task{NodeUUID: "n1", HardwareType: "acme"}
	for range 2 {
		st, err := drv.Power().GetPowerState(context.Background(), task)
		var auth *driver.BMCAuthError
		switch {
		case errors.As(err, &auth):
			fmt.Printf("refused: %s at %s (ErrBMCAuthentication: %t)\n", auth.Username, auth.Address, errors.Is(err, driver.ErrBMCAuthentication))
		case err != nil:
			fmt.Println("error:", err)
		default:
			fmt.Println("power:", st)
		}
	}
	// Output:
	// power interface: acme
	// power: power on
	// refused: admin at 192.0.2.10:623 (ErrBMCAuthentication: true)
}
