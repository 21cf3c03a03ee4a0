// Command anvil-driver-fake serves Anvil's built-in fake-hardware and
// manual-management hardware types (every fake implementation, the no-op
// ones) out of process, as a driver plugin. Tests use it to run the driver
// conformance suite through a real plugin process; operators can use it
// to try a plugin directory.
//
// Build it into a plugin directory under the name the host looks for:
//
//	go build -o /var/lib/anvil/plugins/anvil-driver-fake ./plugins/fake
//
// Its implementations accept the driver_info keys fake_delay (a Go
// duration every operation waits) and fake_fail (operations that fail),
// which is how tests inject slowness and failures across the process
// boundary, and the simulated BMC's fake_bmc_latency, fake_bmc_address
// and fake_bmc_concurrency, which make power and management calls wait
// inside this process as a real BMC's answers would (examples/scalebench). Run by hand, it explains that it must be started by a host and
// exits with status 1.
package main

import (
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin"
)

// version is the plugin's own version.
const version = "1.0.0"

func main() {
	plugin.Serve(plugin.ServeConfig{
		Name:    "fake",
		Version: version,
		Bundle:  builtin.Bundle(fake.Config{}),
	})
}
