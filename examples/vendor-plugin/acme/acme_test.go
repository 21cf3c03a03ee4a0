package acme_test

import (
	"context"
	"errors"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/drivertest"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin/plugintest"
	"github.com/anvilmetal/anvil/examples/vendor-plugin/acme"
)

func newTask() *driver.Task {
	return &driver.Task{NodeUUID: "0d8a4b43-2f5e-4a57-a1d2-5f3c7f2b9e11", HardwareType: acme.Name,
		DriverInfo: map[string]any{acme.PropAddress: "192.0.2.10:443", acme.PropUsername: "admin", acme.PropPassword: "s3cret"}}
}

func TestConformanceInProcess(t *testing.T) {
	for _, i := range acme.Bundle().Implementations {
		t.Run(string(i.Kind), func(t *testing.T) {
			drivertest.Run(t, drivertest.Config{Kind: i.Kind, Name: i.Name, Impl: i.Impl, NewTask: newTask})
		})
	}
}

func TestValidateExplainsBadAddress(t *testing.T) {
	task := newTask()
	task.DriverInfo[acme.PropAddress] = "192.0.2.10"
	err := (&acme.Power{}).Validate(context.Background(), task)
	var inval *driver.InvalidParameterError
	if !errors.As(err, &inval) || inval.Key != acme.PropAddress || inval.Expected != "host:port" {
		t.Errorf("Validate = %v", err)
	}
}

// acmePlugin is the plugin executable (package main one directory up),
// built once for the test binary.
var acmePlugin = &plugintest.Plugin{Package: "github.com/anvilmetal/anvil/examples/vendor-plugin", Name: acme.Name}

func TestMain(m *testing.M) { plugintest.Main(m, acmePlugin) }

// TestThroughPluginWithBuiltins builds the plugin, discovers it in a
// host and composes the acme hardware type from its implementations and
// the built-in ones, as the README describes, then runs the conformance
// suite on the plugin's implementations through the process.
func TestThroughPluginWithBuiltins(t *testing.T) {
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{acme.Name}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	host, reg := plugintest.Load(t, acmePlugin.Path(t), plugintest.Options{Registry: reg})
	drv, err := reg.Resolve(driver.NodeInterfaces{HardwareType: acme.Name})
	if err != nil {
		t.Fatal(err)
	}
	want := map[driver.Kind]string{driver.KindPower: "acme", driver.KindVendor: "acme", driver.KindBoot: fake.Name, driver.KindDeploy: driver.Noop, driver.KindRAID: driver.NoRAID}
	for k, name := range want {
		if drv.Names[k] != name {
			t.Errorf("%s = %q, want %q", k, drv.Names[k], name)
		}
	}
	t.Run("conformance", func(t *testing.T) { plugintest.Conformance(t, host, plugintest.Suite{NewTask: newTask}) })
	t.Run("composed", func(t *testing.T) { drivertest.RunDriver(t, drv, newTask, nil) })

	task := newTask()
	if _, err := drv.Vendor().Call(context.Background(), task, "reset_bmc", "POST", nil); err != nil {
		t.Fatal(err)
	}
	out, err := drv.Vendor().Call(context.Background(), task, "bmc_info", "GET", nil)
	if m, _ := out.(map[string]any); err != nil || m["resets"] != 1.0 {
		t.Errorf("bmc_info = %v, %v", out, err)
	}
	task.DriverInfo[acme.PropPassword] = ""
	err = drv.Power().Validate(context.Background(), task)
	var miss *driver.MissingParameterError
	if !errors.As(err, &miss) || miss.Missing[0] != acme.PropPassword {
		t.Errorf("missing password through plugin = %v", err)
	}
}
