package conductor

import (
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// TestCommandWatchCurrent: a finished command continues the node only
// while it still waits on the watched step of the watched agent. The VM
// end-to-end test found the stale case: a write_image failed, the deploy
// failed, the undeploy's cleaning booted a fresh ramdisk, and the late
// continuation of the failed write_image ran the fresh clean wait's
// "ramdisk just booted" path with no agent URL, failing the cleaning.
func TestCommandWatchCurrent(t *testing.T) {
	const url = "http://192.0.2.100:9999"
	w := &commandWatch{id: "c1", kind: steps.Deploy, step: steps.Step{Interface: "deploy", Name: "write_image"}, url: url}
	node := func(state statemachine.State, agentURL string, deployStep, cleanStep map[string]any) *baremetal.Node {
		return &baremetal.Node{UUID: "n1", ProvisionState: state, DeployStep: deployStep, CleanStep: cleanStep,
			DriverInternalInfo: map[string]any{driver.InternalAgentURL: agentURL}}
	}
	writeImage := map[string]any{"interface": "deploy", "step": "write_image", "priority": 80}
	for _, tc := range []struct {
		name string
		n    *baremetal.Node
		want bool
	}{
		{"waiting on the step", node(statemachine.DeployWait, url, writeImage, nil), true},
		{"deploy failed", node(statemachine.DeployFailed, url, writeImage, nil), false},
		{"cleaning's fresh ramdisk, no agent yet", node(statemachine.CleanWait, "", nil, nil), false},
		{"another agent", node(statemachine.DeployWait, "http://192.0.2.101:9999", writeImage, nil), false},
		{"another step", node(statemachine.DeployWait, url, map[string]any{"interface": "deploy", "step": "erase_devices_metadata"}, nil), false},
	} {
		if got := w.current(tc.n); got != tc.want {
			t.Errorf("%s: current = %v, want %v", tc.name, got, tc.want)
		}
	}
}
