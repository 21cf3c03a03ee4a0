package main

import (
	"context"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/internal/plugine2e"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// TestConductorEndToEnd enrolls a redfish node served by the plugin
// process against the mockup BMC, manages it (verification reads the real
// power state), inspects it out of band, and runs a manual clean with an
// out-of-band BIOS step, all through a conductor on SQLite.
func TestConductorEndToEnd(t *testing.T) {
	ctx := context.Background()
	bmc := newServer(t, redfishtest.Options{TLS: true})
	bmc.SetPowerState("On")

	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{rfdriver.HardwareType}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	cond := plugine2e.StartConductor(t, reg, thePlugin.Path(t), "e2e-redfish")

	n, err := cond.Enroll(ctx, &baremetal.Node{Name: "rf-1", Driver: rfdriver.HardwareType, DriverInfo: map[string]any{
		"redfish_address": bmc.URL(), "redfish_username": "admin", "redfish_password": "password",
		"redfish_verify_ca": false, "redfish_deploy_iso": "http://images.example/ipa.iso",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n.PowerInterface != "redfish" || n.BootInterface != "redfish-virtual-media" || n.BIOSInterface != "redfish" || n.InspectInterface != "redfish" {
		t.Fatalf("interfaces power=%s boot=%s bios=%s inspect=%s", n.PowerInterface, n.BootInterface, n.BIOSInterface, n.InspectInterface)
	}
	if err := cond.Manage(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	m := cond.WaitState(t, n.UUID, statemachine.Manageable)
	if m.PowerState != driver.PowerOn {
		t.Fatalf("verification recorded power %q, the BMC says On", m.PowerState)
	}
	if err := cond.Inspect(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	m = cond.WaitState(t, n.UUID, statemachine.Manageable)
	if m.Properties["cpu_arch"] != "x86_64" || m.Properties["memory_mb"] != "98304" {
		t.Fatalf("inspected properties %v", m.Properties)
	}
	err = cond.Clean(ctx, n.UUID, []steps.Step{{
		Interface: "bios", Name: "apply_configuration",
		Args: map[string]any{"settings": []any{map[string]any{"name": "ProcTurboMode", "value": "Disabled"}}},
	}}, conductor.CleanOptions{DisableRamdisk: true})
	if err != nil {
		t.Fatal(err)
	}
	cond.WaitState(t, n.UUID, statemachine.Manageable)
	attrs := bmc.Resource("/redfish/v1/Systems/" + redfishtest.SystemID + "/Bios")["Attributes"].(map[string]any)
	if attrs["ProcTurboMode"] != "Disabled" {
		t.Fatalf("clean step did not reach the BMC: %v", attrs["ProcTurboMode"])
	}
}
