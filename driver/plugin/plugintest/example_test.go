package plugintest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin/plugintest"
)

// acmePlugin is the example vendor plugin (examples/vendor-plugin), built
// once for this test binary by TestMain.
var acmePlugin = &plugintest.Plugin{Package: "github.com/anvilmetal/anvil/examples/vendor-plugin", Name: "acme"}

// testAcmePlugin is the test a vendor writes for its plugin: load the
// real executable, check what the conductor will resolve, run the
// conformance suite through the process.
func testAcmePlugin(t *testing.T) {
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{"acme"}})
	// The interfaces acme does not serve come from Anvil's built-ins.
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	host, reg := plugintest.Load(t, acmePlugin.Path(t), plugintest.Options{Registry: reg})
	drv, err := reg.Resolve(driver.NodeInterfaces{HardwareType: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if drv.Names[driver.KindPower] != "acme" || drv.Names[driver.KindBoot] != fake.Name {
		t.Fatalf("acme nodes resolve to %v", drv.Names)
	}
	if _, err := drv.Power().GetPowerState(context.Background(), &driver.Task{NodeUUID: "n1", HardwareType: "acme", DriverInfo: acmeInfo()}); err != nil {
		t.Fatal(err)
	}
	plugintest.Conformance(t, host, plugintest.Suite{
		NewTask: func() *driver.Task { return &driver.Task{NodeUUID: "n1", HardwareType: "acme", DriverInfo: acmeInfo()} },
	})
}

func acmeInfo() map[string]any {
	return map[string]any{"acme_address": "192.0.2.10:443", "acme_username": "admin", "acme_password": "s3cret"}
}

// This example is a vendor's test of its plugin, acme. In the vendor's
// repository the plugin's test package declares acmePlugin, makes
// TestMain
//
//	func TestMain(m *testing.M) { plugintest.Main(m, acmePlugin) }
//
// and testAcmePlugin is a Test function (TestExample runs it here).
func Example() {
	fmt.Println("executable:", "anvil-driver-"+acmePlugin.Name)
	// Output: executable: anvil-driver-acme
}
