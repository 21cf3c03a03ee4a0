package conductor_test

import (
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// bootedAgents is an agent factory that scripts every agent booted and
// keeps them, so a test can count what each boot's agent ran.
type bootedAgents struct {
	script func(a *agenttest.Agent)
	mu     sync.Mutex
	all    []*agenttest.Agent
}

func (b *bootedAgents) boot(string) *agenttest.Agent {
	a := agenttest.NewAgent(agenttest.AgentConfig{CommandDelay: 5 * time.Millisecond})
	b.script(a)
	b.mu.Lock()
	b.all = append(b.all, a)
	b.mu.Unlock()
	return a
}

// totals sums a step's runs and the busy answers over every agent booted.
func (b *bootedAgents) totals(kind steps.Kind, iface, step string) (runs, busy int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.all {
		runs += a.StepRuns(kind, iface, step)
		busy += a.BusyAnswers()
	}
	return runs, busy
}

// TestAgentBusyRetriesStepOnNextHeartbeat drives a node through cleaning
// and deploy while the simulated agent answers 409 "Agent is busy" to an
// in-band step twice (erase_devices while cleaning, write_image while
// deploying): the conductor keeps the node waiting, sends the
// same step again on a later heartbeat (the step is not skipped) and the
// operation completes with the step run exactly once on the agent.
func TestAgentBusyRetriesStepOnNextHeartbeat(t *testing.T) {
	t.Parallel()
	agents := &bootedAgents{script: func(a *agenttest.Agent) {
		a.SetStepBehavior(steps.Clean, "deploy", "erase_devices", agenttest.Behavior{Busy: 2})
		a.SetStepBehavior(steps.Deploy, "deploy", "write_image", agenttest.Behavior{Busy: 2})
	}}
	h := newAgentHarness(t, conductor.Options{}, agents.boot)
	n := h.enrollAgentNode("agent-busy")
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)

	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	runs, busy := agents.totals(steps.Clean, "deploy", "erase_devices")
	if busy != 2 {
		t.Fatalf("agent answered busy %d times during cleaning, want 2", busy)
	}
	if runs != 1 {
		t.Fatalf("clean step erase_devices ran %d times on the agent, want exactly 1", runs)
	}
	if r, _ := agents.totals(steps.Clean, "deploy", "erase_devices_metadata"); r != 1 {
		t.Errorf("clean step erase_devices_metadata ran %d times, want 1 (the busy answer must not restart cleaning)", r)
	}

	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{ConfigDrive: []byte(`{"meta_data":{"hostname":"busy"}}`)}))
	h.waitFor(n.UUID, statemachine.Active)
	runs, busy = agents.totals(steps.Deploy, "deploy", "write_image")
	if busy != 4 {
		t.Fatalf("agent busy answers after deploy = %d, want 4 (2 cleaning + 2 deploy)", busy)
	}
	if runs != 1 {
		t.Fatalf("deploy step write_image ran %d times on the agent, want exactly 1", runs)
	}
	hist, err := h.store.ListHistory(h.ctx, n.UUID, 0)
	h.must(err)
	ends := map[string]int{}
	for _, e := range hist {
		ends[e.Event]++
	}
	for _, ev := range []string{"step_end deploy.erase_devices", "step_end deploy.write_image", "step_end deploy.boot_instance"} {
		if ends[ev] == 0 {
			t.Errorf("history lacks %q", ev)
		}
	}
	for _, ev := range []string{"step_end deploy.erase_devices", "step_end deploy.write_image"} {
		if ends[ev] != 1 {
			t.Errorf("%q appears %d times in history, want 1", ev, ends[ev])
		}
	}
}
