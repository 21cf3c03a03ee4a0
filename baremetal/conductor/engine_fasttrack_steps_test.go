package conductor_test

import (
	"sync"
	"testing"

	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// TestFastTrackDeployRunsAgentDeployStep deploys with fast track (the
// agent kept from cleaning, no reboot) where the agent offers a deploy
// step of its own at priority 90: it must be fetched and planned before
// the first in-band step, and run between deploy.deploy (100) and
// write_image (80). Fast track used to run write_image before fetching the
// agent's deploy steps, so the step never ran.
func TestFastTrackDeployRunsAgentDeployStep(t *testing.T) {
	t.Parallel()
	custom := steps.Step{Interface: "deploy", Name: "prepare_firmware", Priority: 90, Abortable: true}
	var mu sync.Mutex
	var agents []*agenttest.Agent
	factory := func(string) *agenttest.Agent {
		a := agenttest.NewAgent(agenttest.AgentConfig{HardwareManagers: []agenttest.HardwareManager{
			agenttest.GenericHardwareManager(),
			{Name: "VendorHardwareManager", VersionKey: "vendor_hardware_manager", Version: "1.0", DeploySteps: []steps.Step{custom}},
		}})
		mu.Lock()
		agents = append(agents, a)
		mu.Unlock()
		return a
	}
	h := newAgentHarnessWith(t, conductor.Options{}, conductor.AgentSettings{FastTrack: true}, factory)
	n := h.enrollAgentNode("ft-steps")
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	h.waitFor(n.UUID, statemachine.Active)
	if got := h.fleet.Boots(n.UUID); got != 1 {
		t.Fatalf("ramdisk boots = %d, want 1 (fast track reuses the cleaning agent)", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(agents) != 1 {
		t.Fatalf("%d agents booted, want 1", len(agents))
	}
	var order []string
	for _, e := range agents[0].Executed() {
		if e.Step != nil && e.Command == "deploy.execute_deploy_step" {
			order = append(order, e.Step.Key())
		}
	}
	if len(order) != 2 || order[0] != custom.Key() || order[1] != "deploy.write_image" {
		t.Fatalf("in-band deploy steps run = %v, want [%s deploy.write_image]", order, custom.Key())
	}
}
