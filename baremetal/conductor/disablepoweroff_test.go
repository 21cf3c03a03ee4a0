package conductor_test

import (
	"sync"
	"testing"

	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestDisablePowerOffLifecycle takes a node with disable_power_off
// (Metal3's NC-SI hosts) through cleaning, deploy and undeploy with the
// direct interface and a simulated IPA, and checks Ironic's rules: the
// node is never powered off out of band; cleaning ends with a reboot
// (tear_down_inband_cleaning); the deploy's tear_down_agent locks the
// agent down (system.lockdown) instead of powering the node off, and
// boot_instance reboots into the instance instead of powering it on.
func TestDisablePowerOffLifecycle(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var agents []*agenttest.Agent
	h := newAgentHarness(t, conductor.Options{}, func(string) *agenttest.Agent {
		a := agenttest.NewAgent(agenttest.AgentConfig{})
		mu.Lock()
		agents = append(agents, a)
		mu.Unlock()
		return a
	})
	n := h.enrollAgentNode("npo")
	if _, err := h.c.Update(h.ctx, n.UUID, func(m *baremetal.Node) error { m.DisablePowerOff = true; return nil }); err != nil {
		t.Fatal(err)
	}
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	noPowerOff(t, h.fleet.PowerCalls(n.UUID), "cleaning")
	calls := h.fleet.PowerCalls(n.UUID)
	if len(calls) == 0 || calls[len(calls)-1].Target != driver.Reboot {
		t.Errorf("cleaning's power actions %v: want the last a reboot (the node leaves the ramdisk without a power off)", targets(calls))
	}
	before := len(calls)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	a := h.waitFor(n.UUID, statemachine.Active)
	if a.PowerState != driver.PowerOn {
		t.Errorf("active node power = %q, want power on", a.PowerState)
	}
	calls = h.fleet.PowerCalls(n.UUID)
	noPowerOff(t, calls, "deploy")
	deploy := targets(calls[before:])
	// deploy.deploy reboots into the ramdisk, boot_instance reboots into
	// the instance.
	if len(deploy) != 2 || deploy[0] != driver.Reboot || deploy[1] != driver.Reboot {
		t.Errorf("deploy's power actions %v, want [rebooting rebooting]", deploy)
	}
	mu.Lock()
	if len(agents) != 2 {
		t.Fatalf("%d ramdisk boots for cleaning and deploy, want 2", len(agents))
	}
	ag := agents[1]
	mu.Unlock()
	if !ag.IsGone() {
		t.Error("the deploy's agent still serves: tear_down_agent did not lock it down")
	}
	if ag.CommandRuns("system.lockdown") != 1 {
		t.Errorf("system.lockdown ran %d times on the deploy's agent, want 1", ag.CommandRuns("system.lockdown"))
	}
	h.must(h.c.Undeploy(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	noPowerOff(t, h.fleet.PowerCalls(n.UUID), "undeploy")
	// The API refuses a power off outright.
	if err := h.c.SetPowerState(h.ctx, n.UUID, statemachine.PowerOff, 0); err == nil {
		t.Error("power off of a disable_power_off node accepted")
	}
}

func noPowerOff(t *testing.T, calls []simfleet.PowerCall, phase string) {
	t.Helper()
	for _, c := range calls {
		if c.Target == driver.PowerOff || c.Target == driver.SoftPowerOff {
			t.Errorf("%s: node powered off (%v) despite disable_power_off", phase, targets(calls))
			return
		}
	}
}

func targets(calls []simfleet.PowerCall) []driver.PowerState {
	out := make([]driver.PowerState, len(calls))
	for i, c := range calls {
		out[i] = c.Target
	}
	return out
}
