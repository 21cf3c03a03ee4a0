package ipmisol_test

import (
	"fmt"

	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/console/ipmisol"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
)

// The embedder registers the console interface beside the ipmi hardware
// type and enables it by name; without that, ipmi nodes keep no-console.
func Example() {
	m := console.NewManager(console.Options{PortRange: [2]int{10000, 20000}})
	defer m.Close()
	for _, enabled := range [][]string{nil, {ipmisol.Name, driver.NoConsole}} {
		reg := driver.NewRegistry(driver.Config{
			EnabledHardwareTypes: []string{ipmitool.HardwareType},
			EnabledInterfaces:    map[driver.Kind][]string{driver.KindConsole: enabled},
		})
		reg.MustRegister(builtin.Bundle(fake.Config{}))
		reg.MustRegister(ipmitool.NewDrivers(ipmitool.Options{}).Bundle())
		reg.MustRegister(ipmisol.New(m, ipmisol.Options{}).Bundle())
		def, err := reg.DefaultInterface(ipmitool.HardwareType, driver.KindConsole)
		fmt.Println(def, err)
	}
	// Output:
	// no-console <nil>
	// ipmitool-socat <nil>
}
