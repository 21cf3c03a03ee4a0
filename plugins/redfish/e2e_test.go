package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/plugin"
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

	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "anvil.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{rfdriver.HardwareType}})
	if err := reg.Register(driver.Builtins(driver.FakeConfig{})); err != nil {
		t.Fatal(err)
	}
	agent, err := agentclient.NewClient(agentclient.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(agent)); err != nil {
		t.Fatal(err)
	}
	host := plugin.NewHost(plugin.HostConfig{})
	t.Cleanup(func() { host.Close() })
	if _, err := host.Load(ctx, binary); err != nil {
		t.Fatal(err)
	}
	if err := host.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := reg.Check(); err != nil {
		t.Fatal(err)
	}
	cond, err := baremetal.New(store, reg, baremetal.AgentSettings{Client: agent}, baremetal.Options{
		Hostname: "e2e-redfish", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cond.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cond.Stop(sctx)
	})

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
	m := waitState(t, store, n.UUID, statemachine.Manageable)
	if m.PowerState != string(driver.PowerOn) {
		t.Fatalf("verification recorded power %q, the BMC says On", m.PowerState)
	}
	if err := cond.Inspect(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	m = waitState(t, store, n.UUID, statemachine.Manageable)
	if m.Properties["cpu_arch"] != "x86_64" || m.Properties["memory_mb"] != "98304" {
		t.Fatalf("inspected properties %v", m.Properties)
	}
	err = cond.Clean(ctx, n.UUID, []steps.Step{{
		Interface: "bios", Name: "apply_configuration",
		Args: map[string]any{"settings": []any{map[string]any{"name": "ProcTurboMode", "value": "Disabled"}}},
	}}, baremetal.CleanOptions{DisableRamdisk: true})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, store, n.UUID, statemachine.Manageable)
	attrs := bmc.Resource("/redfish/v1/Systems/" + redfishtest.SystemID + "/Bios")["Attributes"].(map[string]any)
	if attrs["ProcTurboMode"] != "Disabled" {
		t.Fatalf("clean step did not reach the BMC: %v", attrs["ProcTurboMode"])
	}
}

func waitState(t *testing.T, s baremetal.Store, uuid string, want statemachine.State) *baremetal.Node {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := s.GetNode(context.Background(), uuid)
		if err != nil {
			t.Fatal(err)
		}
		if n.ProvisionState == string(want) && n.Reservation == "" {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: state %q target %q reserved by %q last error %q; want %q",
				uuid, n.ProvisionState, n.TargetProvisionState, n.Reservation, n.LastError, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
