package ipmitool_test

import (
	"errors"
	"fmt"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
)

// ExampleParseInfo validates driver_info as Ironic names it; errors name
// the node, the property and what was expected, never the password.
func ExampleParseInfo() {
	task := &driver.Task{NodeUUID: "node-1", DriverInfo: map[string]any{
		"ipmi_address": "10.0.0.9", "ipmi_port": 6230.0, "ipmi_username": "admin",
		"ipmi_password": "secret", "ipmi_cipher_suite": "3",
	}}
	info, err := ipmitool.ParseInfo(driver.ReadDriverInfo(task, driver.KindPower, ipmitool.ImplIPMITool))
	fmt.Println(info, err)

	task.DriverInfo = map[string]any{"ipmi_address": "10.0.0.9", "ipmi_priv_level": "ROOT"}
	_, err = ipmitool.ParseInfo(driver.ReadDriverInfo(task, driver.KindPower, ipmitool.ImplIPMITool))
	fmt.Println(errors.Is(err, driver.ErrInvalidParameter), err)
	// Output:
	// ipmi 10.0.0.9 port=6230 user="admin" priv=ADMINISTRATOR protocol=2.0 cipher="3" <nil>
	// true power/ipmitool: node node-1 has an invalid driver_info["ipmi_priv_level"]: expected one of "ADMINISTRATOR", "CALLBACK", "OPERATOR", "USER"
}

// ExampleNew shows how a missing ipmitool is reported.
func ExampleNew() {
	_, err := ipmitool.New(ipmitool.Info{Address: "10.0.0.9", PrivLevel: "ADMINISTRATOR", ProtocolVersion: "2.0"},
		ipmitool.Options{IpmitoolPath: "/nonexistent/ipmitool"})
	fmt.Println(errors.Is(err, ipmitool.ErrNotInstalled))
	// Output:
	// true
}
