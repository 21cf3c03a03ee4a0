package plugin_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin"
)

// A vendor's main: serve a bundle of implementations.
func ExampleServe() {
	plugin.Serve(plugin.ServeConfig{
		Name:    "fake",
		Version: "1.0.0",
		Bundle:  builtin.Bundle(fake.Config{}),
	})
}

// A host: discover plugins, log through slog, register them beside the
// built-ins and use them like any implementation.
func ExampleHost() {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	host := plugin.NewHost(plugin.HostConfig{Dirs: []string{"/var/lib/anvil/plugins"}, Logger: logger})
	defer host.Close()

	report, err := host.Discover(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, skipped := range report.Skipped {
		fmt.Println("skipped:", skipped)
	}
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{"acme"}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		fmt.Println(err)
		return
	}
	if err := host.Register(reg); err != nil {
		fmt.Println(err)
		return
	}
	drv, err := reg.Resolve(driver.NodeInterfaces{Node: "node-1", HardwareType: "acme"})
	if err != nil {
		fmt.Println(err)
		return
	}
	task := &driver.Task{NodeUUID: "node-1", HardwareType: "acme", DriverInfo: map[string]any{"acme_address": "192.0.2.10:443"}}
	state, err := drv.Power().GetPowerState(ctx, task)
	fmt.Println(state, err)
}
