// Command host is a minimal Anvil host for the vendor plugin example: it
// discovers the plugins in a directory, composes the acme hardware type
// from the plugin's implementations and the built-in ones, and drives one
// node through power and vendor passthru calls.
//
//	go run ./examples/vendor-plugin/host -dir /tmp/anvil-plugins
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin"
)

func main() {
	dir := flag.String("dir", "/tmp/anvil-plugins", "plugin directory holding anvil-driver-acme")
	flag.Parse()
	if err := run(context.Background(), *dir); err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	host := plugin.NewHost(plugin.HostConfig{Dirs: []string{dir}, Logger: logger})
	defer host.Close()
	rep, err := host.Discover(ctx)
	if err != nil {
		return err
	}
	for _, s := range rep.Skipped {
		fmt.Println("skipped:", s)
	}
	for _, p := range rep.Plugins {
		st := p.Status()
		fmt.Printf("plugin %s %s (protocol %d) from %s\n", st.Name, st.Version, st.ProtocolVersion, st.Path)
	}

	// Built-in and plugin implementations share one registry.
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{"acme"}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		return err
	}
	if err := host.Register(reg); err != nil {
		return err
	}
	if err := reg.Check(); err != nil {
		return err
	}

	node := driver.NodeInterfaces{Node: "acme-node-1", HardwareType: "acme"}
	ifaces, err := reg.FillDefaults(node)
	if err != nil {
		return err
	}
	node.Interfaces = ifaces
	drv, err := reg.Resolve(node)
	if err != nil {
		return err
	}
	for _, k := range driver.Kinds() {
		src, _ := reg.Source(k, drv.Names[k])
		fmt.Printf("  %-10s %-10s from %s\n", k, drv.Names[k], src)
	}

	task := &driver.Task{
		NodeUUID: "0d8a4b43-2f5e-4a57-a1d2-5f3c7f2b9e11", NodeName: node.Node, HardwareType: "acme", Interfaces: drv.Names,
		DriverInfo: map[string]any{"acme_address": "192.0.2.10:443", "acme_username": "admin", "acme_password": "s3cret"},
	}
	results := drv.Validate(ctx, task)
	for _, k := range slices.Sorted(maps.Keys(results)) {
		fmt.Printf("validate %-10s %v\n", k, orOK(results[k]))
	}
	if err := drv.Power().SetPowerState(ctx, task, driver.PowerOn, 0); err != nil {
		return err
	}
	state, err := drv.Power().GetPowerState(ctx, task)
	if err != nil {
		return err
	}
	fmt.Println("power state:", state)
	if _, err := drv.Vendor().Call(ctx, task, "reset_bmc", "POST", nil); err != nil {
		return err
	}
	info, err := drv.Vendor().Call(ctx, task, "bmc_info", "GET", nil)
	if err != nil {
		return err
	}
	fmt.Println("bmc_info:", info)
	fmt.Println("driver_internal_info to persist:", task.Changes().DriverInternalInfo)
	return nil
}

func orOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
