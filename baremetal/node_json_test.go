package baremetal_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
)

var updateJSON = flag.Bool("update", false, "rewrite testdata/node.golden.json from the current code")

// TestNodeJSONGolden pins the bytes encoding/json produces for a node with
// every state field set: the provision and power states are typed
// (statemachine.State, statemachine.PowerState) and must encode exactly as
// the plain strings they replaced, so that API users and the plugin wire
// see no change. The golden was written by the code before the change.
func TestNodeJSONGolden(t *testing.T) {
	n := secretNode()
	n.UUID = "8a2f6f3e-6c1d-4bb0-9a4e-7d2f1c3b5a10"
	n.Name = "rack1-u07"
	n.Driver = "ipmi"
	n.ProvisionState = "wait call-back"
	n.TargetProvisionState = "active"
	n.PowerState = "power off"
	n.TargetPowerState = "power on"
	n.Reservation = "conductor-1"
	n.LastError = "deploy step timed out"
	n.Version = 7
	n.ProvisionUpdatedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n.UpdatedAt = time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)
	n.DeployInterface = "direct"
	n.PowerInterface = "ipmitool"
	got, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "node.golden.json")
	if *updateJSON {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("node JSON changed:\n got: %s\nwant: %s", got, want)
	}
}

// TestNodeStatesAreStatemachineTypes pins the one-type-per-concept rule:
// a node's and an event's states are the statemachine's types, and
// driver.PowerState is statemachine.PowerState itself, so no caller needs a
// conversion between them (before, every field here was a plain string and
// this test did not compile).
func TestNodeStatesAreStatemachineTypes(t *testing.T) {
	n := baremetal.Node{ProvisionState: statemachine.Active, TargetProvisionState: statemachine.Active,
		PowerState: driver.PowerOn, TargetPowerState: statemachine.PowerOff}
	var ps, tps statemachine.State = n.ProvisionState, n.TargetProvisionState
	var pw, tpw driver.PowerState = n.PowerState, n.TargetPowerState
	e := conductor.Event{From: ps, To: tps, Target: ps, Trigger: statemachine.EventDeploy, PowerState: pw}
	if reflect.TypeFor[driver.PowerState]() != reflect.TypeFor[statemachine.PowerState]() {
		t.Errorf("driver.PowerState is %v, want an alias of statemachine.PowerState", reflect.TypeFor[driver.PowerState]())
	}
	if e.To != statemachine.Active || tpw != statemachine.PowerOff || e.PowerState != statemachine.PowerOn {
		t.Errorf("event %+v, target power %q", e, tpw)
	}
}
