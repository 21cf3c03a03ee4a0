package conductor_test

import (
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
)

// deployOnce takes a fresh agent node from enroll to a deploy (automated
// cleaning off) and returns it.
func (h *agentHarness) deployOnce(name string) *baremetal.Node {
	h.t.Helper()
	n := h.enrollAgentNode(name)
	h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error { n.AutomatedClean = new(false); return nil }))
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	return n
}

// TestDeployFailsWhenAgentDeployStepsFail: the agent's get_deploy_steps
// fails at the first heartbeat in wait call-back, so the deploy fails
// with a last_error saying the steps could not be fetched (Ironic), not a
// warning in the log.
func TestDeployFailsWhenAgentDeployStepsFail(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{}, scripted(func(a *agenttest.Agent) {
		a.SetBehavior("deploy.get_deploy_steps", agenttest.Behavior{
			Fail: &agentclient.AgentError{Type: "HardwareManagerMethodNotFound", Code: 500, Message: "no hardware manager answers get_deploy_steps"}})
	}))
	n := h.deployOnce("steps-fail")
	f := h.waitFor(n.UUID, statemachine.DeployFailed)
	if !strings.Contains(f.LastError, "Failed to get deploy steps from the agent") || !strings.Contains(f.LastError, "no hardware manager answers") {
		t.Fatalf("last error %q does not say the deploy steps could not be fetched", f.LastError)
	}
	if f.DriverInternalInfo[driver.InternalAgentURL] != nil {
		t.Errorf("failed deploy kept the agent URL")
	}
}

// TestDeployRetriesBusyAgentDeploySteps: an agent answering busy to
// get_deploy_steps is asked again at the next heartbeat and the deploy
// completes.
func TestDeployRetriesBusyAgentDeploySteps(t *testing.T) {
	t.Parallel()
	agents := &bootedAgents{script: func(a *agenttest.Agent) {
		a.SetBehavior("deploy.get_deploy_steps", agenttest.Behavior{Busy: 2})
	}}
	h := newAgentHarness(t, conductor.Options{}, agents.boot)
	n := h.deployOnce("steps-busy")
	h.waitFor(n.UUID, statemachine.Active)
	agents.mu.Lock()
	busy := 0
	for _, a := range agents.all {
		busy += a.BusyAnswers()
	}
	agents.mu.Unlock()
	if busy != 2 {
		t.Fatalf("busy answers = %d, want 2 (the fetch was retried after each)", busy)
	}
}
