package conductor

import (
	"fmt"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/steps"
)

// TestAgentBusyRetriesSameStep checks the mapping Ironic applies to an
// agent answering 409: wait for the next heartbeat and run the same step
// again, never fail.
func TestAgentBusyRetriesSameStep(t *testing.T) {
	t.Parallel()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	c := &Conductor{drivers: reg}
	tk := &task{c: c, node: &baremetal.Node{UUID: "n1", DriverInternalInfo: map[string]any{driver.InternalAgentURL: "https://a"}}}
	busy := fmt.Errorf("deploy: %w", agentclient.ErrAgentBusy)
	out := c.classify(tk, steps.Clean, driver.StepResult{}, busy)
	if out.Kind != steps.AgentBusy {
		t.Fatalf("busy agent classified as %v", out.Kind)
	}
	p, err := steps.NewPlanner(steps.Config{})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	prog := steps.Progress{Kind: steps.Clean, Steps: []steps.Step{{Interface: "deploy", Name: "erase_devices", Priority: 10}}, Index: &i,
		Current: &steps.Step{Interface: "deploy", Name: "erase_devices", Priority: 10}}
	a := p.Decide(prog, out)
	if a.Kind != steps.Wait || a.Progress.SkipCurrentStep == nil || *a.Progress.SkipCurrentStep {
		t.Fatalf("decision %v with skip %v, want wait and re-run the same step", a.Kind, a.Progress.SkipCurrentStep)
	}
	lost := fmt.Errorf("x: %w", agentclient.ErrConnectionFailed)
	if got := c.classify(tk, steps.Clean, driver.StepResult{}, lost); got.Kind != steps.AgentConnectionLost || got.AgentURLMissing {
		t.Fatalf("connection failure classified as %+v", got)
	}
	if got := c.classify(tk, steps.Clean, driver.StepResult{Wait: true}, nil); got.Kind != steps.StepWaiting {
		t.Fatalf("waiting step classified as %v", got.Kind)
	}
}
