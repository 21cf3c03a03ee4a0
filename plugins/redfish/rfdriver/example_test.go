package rfdriver_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
)

// Example drives a (simulated) BMC through the client layer: one session
// is created, reused for every call, and logged out by Close.
func Example() {
	bmc, err := redfishtest.New(redfishtest.Options{})
	if err != nil {
		panic(err)
	}
	defer bmc.Close()

	task := &driver.Task{NodeUUID: "node-1", DriverInfo: map[string]any{
		"redfish_address": bmc.URL(), "redfish_username": "admin", "redfish_password": "password",
	}}
	info, err := rfdriver.ParseInfo(driver.ReadDriverInfo(task, driver.KindPower, rfdriver.ImplRedfish))
	if err != nil {
		panic(err)
	}
	pool := rfdriver.NewPool(rfdriver.Options{})
	ctx := context.Background()
	conn, _ := pool.Conn(info)
	sys, err := conn.System(ctx, info.SystemID)
	if err != nil {
		panic(err)
	}
	used, _ := sys.Reset("On", "ForceOn")
	state, _ := sys.PowerState()
	fmt.Println("reset:", used, "power:", state, "sessions:", bmc.ActiveSessions())
	_ = pool.Close(ctx)
	fmt.Println("after close:", bmc.ActiveSessions())
	// Output:
	// reset: On power: On sessions: 1
	// after close: 0
}

// ExampleParseInfo shows the typed errors for bad driver_info: every
// missing key together, else the first invalid key and what was expected.
func ExampleParseInfo() {
	task := &driver.Task{NodeUUID: "node-1", DriverInfo: map[string]any{"redfish_password": "secret"}}
	_, err := rfdriver.ParseInfo(driver.ReadDriverInfo(task, driver.KindPower, rfdriver.ImplRedfish))
	var missing *driver.MissingParameterError
	fmt.Println(errors.As(err, &missing), missing.Missing)
	fmt.Println(err)

	task.DriverInfo = map[string]any{"redfish_address": "bmc.example", "redfish_auth_type": "kerberos"}
	_, err = rfdriver.ParseInfo(driver.ReadDriverInfo(task, driver.KindPower, rfdriver.ImplRedfish))
	var invalid *driver.InvalidParameterError
	fmt.Println(errors.As(err, &invalid), invalid.Key)
	fmt.Println(err)
	// Output:
	// true [redfish_address redfish_username]
	// power/redfish: node node-1 is missing required driver_info: redfish_address, redfish_username (a user name to go with redfish_password)
	// true redfish_auth_type
	// power/redfish: node node-1 has an invalid driver_info["redfish_auth_type"]: expected one of "basic", "session", "auto"
}

// ExampleDrivers_Bundle registers the redfish hardware type in process.
func ExampleDrivers_Bundle() {
	d := rfdriver.NewDrivers(rfdriver.Options{})
	defer d.Close(context.Background())
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{rfdriver.HardwareType}})
	if err := reg.Register(d.Bundle()); err != nil {
		panic(err)
	}
	fmt.Println(reg.Implementations(driver.KindBoot))
	// Output:
	// [redfish-virtual-media]
}
