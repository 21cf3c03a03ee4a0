package main

import (
	"context"
	"strconv"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/internal/ipmisim"
	"github.com/anvilmetal/anvil/internal/plugine2e"
	"github.com/anvilmetal/anvil/netboot/netboottest"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// TestConductorEndToEnd enrolls an ipmi node served by the plugin process
// against ipmi_sim, manages it (verification reads the simulator's real
// power state) and runs a manual clean with the out-of-band
// management.clear_system_event_log step.
func TestConductorEndToEnd(t *testing.T) {
	ipmisim.Require(t)
	ctx := context.Background()
	bmc := ipmisim.Start(t, ipmisim.Options{PoweredOn: true})

	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{ipmitool.HardwareType}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	// The network boot interfaces, built in: the ipmi hardware type's
	// default boot interface (ipxe) resolves with no stand-in.
	if err := reg.Register(pxe.New(netboottest.NewStore(), pxe.Options{}).Bundle()); err != nil {
		t.Fatal(err)
	}
	cond := plugine2e.StartConductor(t, reg, thePlugin.Path(t), "e2e-ipmi")

	n, err := cond.Enroll(ctx, &baremetal.Node{Name: "ipmi-1", Driver: ipmitool.HardwareType, DriverInfo: map[string]any{
		"ipmi_address": bmc.Addr, "ipmi_port": strconv.Itoa(bmc.Port), "ipmi_username": bmc.Username,
		"ipmi_password": bmc.Password, "ipmi_cipher_suite": "3",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n.PowerInterface != "ipmitool" || n.ManagementInterface != "ipmitool" || n.VendorInterface != "ipmitool" || n.BootInterface != "ipxe" {
		t.Fatalf("interfaces power=%s management=%s vendor=%s boot=%s", n.PowerInterface, n.ManagementInterface, n.VendorInterface, n.BootInterface)
	}
	if err := cond.Manage(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	m := cond.WaitState(t, n.UUID, statemachine.Manageable)
	if m.PowerState != driver.PowerOn {
		t.Fatalf("verification recorded power %q, the simulator is on", m.PowerState)
	}
	// Put a record in the SEL (Add SEL Entry), then clean it out of band.
	info, err := ipmitool.ParseInfo(driver.NewInfoReader(n.UUID, driver.KindPower, ipmitool.ImplIPMITool, "driver_info", n.DriverInfo))
	if err != nil {
		t.Fatal(err)
	}
	direct, err := ipmitool.New(info, ipmitool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	selEntries := func() int {
		t.Helper()
		r, err := direct.Raw(ctx, 0x0a, 0x40, nil) // Get SEL Info
		if err != nil || len(r) < 3 {
			t.Fatalf("get SEL info: %x %v", r, err)
		}
		return int(r[1]) | int(r[2])<<8
	}
	if _, err := direct.Raw(ctx, 0x0a, 0x44, []byte{0, 0, 0x02, 0, 0, 0, 0, 0x20, 0, 0x04, 0x01, 0x30, 0x01, 0x09, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if selEntries() == 0 {
		t.Fatal("SEL entry not added")
	}
	err = cond.Clean(ctx, n.UUID, []steps.Step{{Interface: "management", Name: "clear_system_event_log"}}, conductor.CleanOptions{DisableRamdisk: true})
	if err != nil {
		t.Fatal(err)
	}
	m = cond.WaitState(t, n.UUID, statemachine.Manageable)
	if m.LastError != "" {
		t.Fatalf("clean left an error: %s", m.LastError)
	}
	if n := selEntries(); n != 0 {
		t.Fatalf("SEL still holds %d entries after the clean", n)
	}
}
