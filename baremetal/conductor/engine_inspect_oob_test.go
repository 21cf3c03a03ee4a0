package conductor_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestRedfishInspectionStoresInventory: out-of-band inspection through
// the redfish inspect interface (against the stateful DMTF mockup BMC)
// stores an inventory in IPA's format and plugin data whose
// all_interfaces gives each NIC its PXE flag, as Ironic 2025.2 stores
// them. Before, GET /v1/nodes/{node}/inventory answered 404 after it, and
// Metal3's baremetal-operator restarted inspection forever.
func TestRedfishInspectionStoresInventory(t *testing.T) {
	t.Parallel()
	bmc, err := redfishtest.New(redfishtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bmc.Close)
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{rfdriver.HardwareType},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindBoot: {rfdriver.ImplVirtualMedia}, driver.KindDeploy: {agentdeploy.Name}}})
	drv := rfdriver.NewDrivers(rfdriver.Options{})
	t.Cleanup(func() { _ = drv.Close(context.Background()) })
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(nil)); err != nil {
		t.Fatal(err)
	}
	for _, b := range []driver.Bundle{builtin.Bundle(fake.Config{}), drv.Bundle()} {
		if err := reg.Register(b); err != nil {
			t.Fatal(err)
		}
	}
	store := openStore(t, false)
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "oob-inspect", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	})
	h := &harness{t: t, store: store, c: c, ctx: ctx}
	n, err := c.Enroll(ctx, &baremetal.Node{Name: uniqueName("rf"), Driver: rfdriver.HardwareType,
		DriverInfo: map[string]any{"redfish_address": bmc.URL(), "redfish_username": "admin", "redfish_password": "password",
			"redfish_system_id": "/redfish/v1/Systems/" + redfishtest.SystemID}})
	if err != nil {
		t.Fatal(err)
	}
	if n.InspectInterface != rfdriver.ImplRedfish {
		t.Fatalf("inspect interface %q", n.InspectInterface)
	}
	if err := c.Manage(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	if err := c.Inspect(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	got := h.waitFor(n.UUID, statemachine.Manageable)
	if got.LastError != "" {
		t.Fatalf("inspection: %s", got.LastError)
	}
	if _, left := got.DriverInternalInfo[driver.InspectionInventoryKey]; left {
		t.Error("the inventory was left in driver_internal_info")
	}
	stored, err := c.NodeInventory(ctx, n.Name)
	if err != nil {
		t.Fatalf("no inventory after out-of-band inspection: %v", err)
	}
	var inv struct {
		Memory struct {
			PhysicalMB int `json:"physical_mb"`
		} `json:"memory"`
		CPU struct {
			Count        int    `json:"count"`
			Architecture string `json:"architecture"`
		} `json:"cpu"`
		Interfaces []struct {
			Name string `json:"name"`
			MAC  string `json:"mac_address"`
		} `json:"interfaces"`
	}
	if err := json.Unmarshal(stored.Inventory, &inv); err != nil {
		t.Fatal(err)
	}
	if inv.Memory.PhysicalMB == 0 || inv.CPU.Architecture == "" || len(inv.Interfaces) == 0 {
		t.Fatalf("inventory %s", stored.Inventory)
	}
	var pd struct {
		All map[string]struct {
			MAC string `json:"mac_address"`
			PXE *bool  `json:"pxe_enabled"`
		} `json:"all_interfaces"`
		MACs []string `json:"macs"`
	}
	if err := json.Unmarshal(stored.PluginData, &pd); err != nil {
		t.Fatal(err)
	}
	if len(pd.All) != len(inv.Interfaces) || len(pd.MACs) != len(inv.Interfaces) {
		t.Fatalf("plugin data %s for %d interfaces", stored.PluginData, len(inv.Interfaces))
	}
	for _, i := range inv.Interfaces {
		e, ok := pd.All[i.Name]
		if !ok || e.PXE == nil || !*e.PXE || e.MAC != i.MAC {
			t.Errorf("all_interfaces[%s] = %+v", i.Name, e)
		}
	}
}
