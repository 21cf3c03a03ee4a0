package baremetal_test

import (
	"fmt"

	"github.com/anvilmetal/anvil/baremetal"
)

// A node prints, logs and encodes masked: BMC passwords and the agent
// token never reach a log line.
func ExampleNode_Masked() {
	n := &baremetal.Node{
		UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", ProvisionState: "available", Version: 3,
		DriverInfo: map[string]any{"ipmi_address": "10.0.0.7", "ipmi_password": "hunter2"},
	}
	fmt.Println(n)
	fmt.Println(n.Masked().DriverInfo)
	fmt.Println(n.DriverInfo["ipmi_password"]) // the field itself keeps the secret
	// Output:
	// node 1be26c0b-03f2-4d2e-ae87-c02d7f33c123 provision_state="available" version=3
	// map[ipmi_address:10.0.0.7 ipmi_password:******]
	// hunter2
}

func ExampleMaskSecrets() {
	info := map[string]any{
		"redfish_address":  "https://10.0.0.8",
		"redfish_password": "s3cret",
		"note":             "rotated; old password=abc123",
	}
	masked := baremetal.MaskSecrets(info)
	fmt.Println(masked["redfish_address"])
	fmt.Println(masked["redfish_password"])
	fmt.Println(masked["note"])
	// Output:
	// https://10.0.0.8
	// ******
	// rotated; old password=******
}
