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

	info, err := rfdriver.ParseInfo(map[string]any{
		"redfish_address": bmc.URL(), "redfish_username": "admin", "redfish_password": "password",
	})
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

// ExampleParseInfo shows the typed error for bad driver_info.
func ExampleParseInfo() {
	_, err := rfdriver.ParseInfo(map[string]any{"redfish_address": "bmc.example", "redfish_auth_type": "kerberos"})
	var ie *rfdriver.InfoError
	fmt.Println(errors.As(err, &ie), ie.Field)
	fmt.Println(err)
	// Output:
	// true redfish_auth_type
	// redfish: driver_info redfish_auth_type is invalid: expected one of "basic", "session", "auto"
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
