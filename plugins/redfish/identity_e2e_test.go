package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/internal/plugine2e"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
	"github.com/anvilmetal/anvil/statemachine"
)

// waitPowerDone polls until the node's power action has finished (no
// target power state, no reservation) and returns the node.
func waitPowerDone(t *testing.T, cond *plugine2e.Conductor, uuid string) *baremetal.Node {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := cond.Store.GetNode(context.Background(), uuid)
		if err != nil {
			t.Fatal(err)
		}
		if n.TargetPowerState == "" && n.Reservation == "" {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: power action still running: target %q reserved by %q", uuid, n.TargetPowerState, n.Reservation)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConductorRefusesAnotherMachine manages a node through the plugin
// process (the identity recorded by the manage path's power read must be
// persisted by the conductor), makes another machine answer at the BMC's
// address, and checks that a power on is refused with an error naming
// both identities and nothing sent to the BMC; after a driver_info update
// (a deliberate change) the power on is accepted and the new machine is
// recorded; an inspection records a changed machine afresh. A misspelt
// redfish_* key is a validation warning in the node's history.
func TestConductorRefusesAnotherMachine(t *testing.T) {
	ctx := context.Background()
	bmc := newServer(t, redfishtest.Options{})
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{rfdriver.HardwareType}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	cond := plugine2e.StartConductor(t, reg, thePlugin.Path(t), "identity")
	n, err := cond.Enroll(ctx, &baremetal.Node{Name: "rf-id", Driver: rfdriver.HardwareType, DriverInfo: map[string]any{
		"redfish_address": bmc.URL(), "redfish_username": "admin", "redfish_password": "password",
		"redfish_deploy_iso": "http://images.example/ipa.iso", "redfish_frobnicate": "yes",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cond.Manage(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	m := cond.WaitState(t, n.UUID, statemachine.Manageable)
	orig := bmc.Resource(redfishtest.SystemPath(redfishtest.SystemID))["UUID"].(string)
	if got := m.DriverInternalInfo[driver.IdentityKey]; got != "redfish-uuid:"+orig {
		t.Fatalf("manage did not persist the machine identity: %v", got)
	}

	// The misspelt key does not fail manage; it is a validation warning in
	// the node's history.
	hist, err := cond.Store.ListHistory(ctx, n.UUID, 0)
	if err != nil {
		t.Fatal(err)
	}
	warned := false
	for _, h := range hist {
		warned = warned || (h.Severity == baremetal.HistoryWarning && strings.Contains(h.Message, "redfish_frobnicate"))
	}
	if !warned {
		t.Fatalf("no validation warning naming redfish_frobnicate in the history: %+v", hist)
	}

	const other = "0b9c7d5e-1111-4222-8333-444455556666"
	bmc.SetSystemUUID(redfishtest.SystemID, other)
	resets := len(bmc.Stats().Resets)
	if err := cond.SetPowerState(ctx, n.UUID, statemachine.PowerOn, 0); err != nil {
		t.Fatal(err)
	}
	m = waitPowerDone(t, cond, n.UUID)
	if !strings.Contains(m.LastError, orig) || !strings.Contains(m.LastError, other) || !strings.Contains(m.LastError, "refusing to act on another machine") {
		t.Fatalf("power on of another machine: last error %q", m.LastError)
	}
	if got := len(bmc.Stats().Resets); got != resets || bmc.PowerState() != "Off" {
		t.Fatalf("a reset reached the other machine: %v, power %s", bmc.Stats().Resets[resets:], bmc.PowerState())
	}
	if got := m.DriverInternalInfo[driver.IdentityKey]; got != "redfish-uuid:"+orig {
		t.Fatalf("a refused action changed the record: %v", got)
	}

	if _, err := cond.Update(ctx, n.UUID, func(n *baremetal.Node) error {
		n.DriverInfo["redfish_auth_type"] = "auto"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if m, _ = cond.Store.GetNode(ctx, n.UUID); m.DriverInternalInfo[driver.IdentityKey] != nil {
		t.Fatalf("a driver_info update kept the identity %v", m.DriverInternalInfo[driver.IdentityKey])
	}
	if err := cond.SetPowerState(ctx, n.UUID, statemachine.PowerOn, 0); err != nil {
		t.Fatal(err)
	}
	m = waitPowerDone(t, cond, n.UUID)
	if bmc.PowerState() != "On" || len(bmc.Stats().Resets) != resets+1 || m.PowerState != driver.PowerOn || m.DriverInternalInfo[driver.IdentityKey] != "redfish-uuid:"+other {
		t.Fatalf("after the update: power %s (node %s), identity %v", bmc.PowerState(), m.PowerState, m.DriverInternalInfo[driver.IdentityKey])
	}

	const third = "0b9c7d5e-7777-4222-8333-444455556666"
	bmc.SetSystemUUID(redfishtest.SystemID, third)
	if err := cond.Inspect(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	m = cond.WaitState(t, n.UUID, statemachine.Manageable)
	if m.DriverInternalInfo[driver.IdentityKey] != "redfish-uuid:"+third || m.Properties["cpu_arch"] != "x86_64" {
		t.Fatalf("inspection did not record the machine afresh: identity %v, properties %v", m.DriverInternalInfo[driver.IdentityKey], m.Properties)
	}
}
