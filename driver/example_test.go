package driver_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
)

func ExampleRegistry_Resolve() {
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		fmt.Println(err)
		return
	}
	drv, err := reg.Resolve(driver.NodeInterfaces{Node: "node-1", HardwareType: builtin.FakeHardware})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(drv.Names[driver.KindPower], drv.Names[driver.KindNetwork], drv.Names[driver.KindVendor])

	_, err = reg.Resolve(driver.NodeInterfaces{
		Node: "node-2", HardwareType: builtin.FakeHardware,
		Interfaces: map[driver.Kind]string{driver.KindPower: "ipmitool"},
	})
	var nf *driver.InterfaceNotFoundError
	fmt.Println(errors.As(err, &nf), nf.Valid)
	// Output:
	// fake noop fake
	// true [fake]
}

func ExampleTask_Changes() {
	power := fake.NewPower(fake.Config{})
	task := &driver.Task{NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", HardwareType: builtin.FakeHardware}
	if err := power.SetPowerState(context.Background(), task, driver.PowerOn, 0); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(task.Changes().DriverInternalInfo)
	// Output:
	// map[fake_power_state:power on]
}

func ExampleRegistry_MustRegister() {
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware, builtin.FakeHardware}})
	reg.MustRegister(builtin.Bundle(fake.Config{})) // a mistake here panics at start
	for _, w := range reg.Warnings() {
		fmt.Println(w) // an embedder logs these at start
	}
	// Output:
	// driver: enabled_hardware_types lists "fake-hardware" 2 times; the duplicates are ignored
}

func ExampleNMIInjector() {
	var mgmt driver.ManagementInterface = fake.NewManagement(fake.Config{})
	task := &driver.Task{NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", HardwareType: builtin.FakeHardware}
	// Optional capabilities are found with driver.As, the same way on
	// built-ins and on plugin proxies.
	if nmi, ok := driver.As[driver.NMIInjector](mgmt); ok {
		fmt.Println(nmi.InjectNMI(context.Background(), task))
	}
	if err := driver.Available(mgmt); err == nil {
		fmt.Println("available")
	}
	// Output:
	// <nil>
	// available
}

// ExampleReadDriverInfo parses a driver's driver_info with the reader:
// read every key, then ask Err once, which lists every missing key
// together or names the first invalid one and what was expected.
func ExampleReadDriverInfo() {
	task := &driver.Task{NodeUUID: "node-1", DriverInfo: map[string]any{
		"acme_port": 6230.0, "acme_tls": "yes", "acme_mode": "Fast",
	}}
	r := driver.ReadDriverInfo(task, driver.KindPower, "acme")
	address := r.String("acme_address", true)
	user := r.String("acme_username", true)
	port := r.Port("acme_port", false)
	tls := r.Bool("acme_tls", false)
	mode := r.OneOf("acme_mode", "safe", "safe", "fast")
	timeout := r.Duration("acme_timeout", 30*time.Second)
	fmt.Printf("%q %q %d %t %s %s\n", address, user, port, tls, mode, timeout)
	fmt.Println(r.Err())

	task.DriverInfo = map[string]any{"acme_address": "10.0.0.9", "acme_username": "admin", "acme_port": "http"}
	r = driver.ReadDriverInfo(task, driver.KindPower, "acme")
	r.String("acme_address", true)
	r.String("acme_username", true)
	r.Port("acme_port", false)
	err := r.Err()
	var invalid *driver.InvalidParameterError
	fmt.Println(errors.As(err, &invalid), invalid.Key, errors.Is(err, driver.ErrInvalidParameter))
	fmt.Println(err)
	// Output:
	// "" "" 6230 true fast 30s
	// power/acme: node node-1 is missing required driver_info: acme_address, acme_username
	// true acme_port true
	// power/acme: node node-1 has an invalid driver_info["acme_port"]: expected a port number between 1 and 65535
}
