package conductor_test

import (
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestAgentRamdiskBootGetsTheAPIURL checks that an agent ramdisk boot
// for cleaning hands the boot interface the ramdisk's parameters
// (ipa-api-url, the conductor's AgentSettings.APIURL): boot interfaces
// that pass parameters to the ramdisk themselves (redfish-virtual-media)
// got none before, so a stock ramdisk booted from virtual media could not
// find the conductor.
func TestAgentRamdiskBootGetsTheAPIURL(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindDeploy: {agentdeploy.Name, fake.Name}}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client)); err != nil {
		t.Fatal(err)
	}
	c := startConductor(t, store, reg, "ramdisk-params", 2)
	h := &harness{t: t, store: store, c: c, ctx: t.Context()}
	n, err := c.Enroll(h.ctx, &baremetal.Node{Name: "params", Driver: builtin.FakeHardware, DeployInterface: agentdeploy.Name})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Manage(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	if err := c.Provide(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	w := h.waitFor(n.UUID, statemachine.CleanWait)
	params, _ := w.DriverInternalInfo[fake.BootRamdiskParamsKey].(map[string]any)
	if params["ipa-api-url"] != "http://127.0.0.1:1" {
		t.Fatalf("ramdisk parameters of the cleaning boot: %v, want ipa-api-url=http://127.0.0.1:1", params)
	}
}
