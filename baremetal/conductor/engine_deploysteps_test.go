package conductor_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// agentRecorder keeps every simulated agent the fleet boots, so a test can
// inspect the ramdisk of a deploy after it was torn down.
type agentRecorder struct {
	mu     sync.Mutex
	agents []*agenttest.Agent
}

func (r *agentRecorder) factory(string) *agenttest.Agent {
	return r.add(agenttest.NewAgent(agenttest.AgentConfig{CommandDelay: 5 * time.Millisecond}))
}

// add records a, built by the fleet's goroutine, and returns it.
func (r *agentRecorder) add(a *agenttest.Agent) *agenttest.Agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.agents = append(r.agents, a)
	return a
}

func (r *agentRecorder) all() []*agenttest.Agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*agenttest.Agent(nil), r.agents...)
}

// TestDeployUserInBandStepRunsAfterAgentReports checks Ironic's
// steps_validated rule: a deploy step of the agent requested by the user
// or by a matching deploy template, unknown when the deploy starts, is
// validated and planned once the agent reported its deploy steps, and
// runs once at its priority (90: after deploy.deploy at 100, before
// write_image at 80).
func TestDeployUserInBandStepRunsAfterAgentReports(t *testing.T) {
	t.Parallel()
	wipe := steps.Step{Interface: "deploy", Name: "erase_devices_metadata", Priority: 90}
	for _, tc := range []struct {
		name   string
		opts   conductor.Options
		traits []any
		user   []steps.Step
		stored *baremetal.DeployTemplate
	}{
		{name: "user step", user: []steps.Step{wipe}},
		{name: "deploy template", traits: []any{"CUSTOM_WIPE"}, opts: conductor.Options{
			DeployTemplates: []conductor.DeployTemplate{{Name: "CUSTOM_WIPE", Steps: []conductor.TemplateStep{
				{Interface: wipe.Interface, Step: wipe.Name, Args: map[string]any{}, Priority: wipe.Priority}}}}}},
		{name: "stored deploy template", traits: []any{"CUSTOM_WIPE_STORED"}, stored: &baremetal.DeployTemplate{Name: "CUSTOM_WIPE_STORED",
			Steps: []baremetal.DeployTemplateStep{{Interface: wipe.Interface, Step: wipe.Name, Args: map[string]any{}, Priority: wipe.Priority}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &agentRecorder{}
			tc.opts.DisableAutomatedClean = true
			h := newAgentHarness(t, tc.opts, rec.factory)
			if tc.stored != nil {
				if err := h.store.DeployTemplates().Create(h.ctx, tc.stored); err != nil {
					t.Fatal(err)
				}
			}
			n := h.enrollAgentNode("inband-step")
			h.must(h.c.Manage(h.ctx, n.UUID))
			h.waitFor(n.UUID, statemachine.Manageable)
			h.must(h.c.Provide(h.ctx, n.UUID))
			h.waitFor(n.UUID, statemachine.Available)
			if tc.traits != nil {
				h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error {
					n.InstanceInfo["traits"] = tc.traits
					return nil
				}))
			}
			h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{DeploySteps: tc.user}))
			h.waitFor(n.UUID, statemachine.Active)

			runs := 0
			for _, a := range rec.all() {
				runs += a.StepRuns(steps.Deploy, "deploy", "erase_devices_metadata")
			}
			if runs != 1 {
				t.Fatalf("agent ran deploy step erase_devices_metadata %d times, want 1", runs)
			}
			hist, err := h.store.ListHistory(h.ctx, n.UUID, 0)
			if err != nil {
				t.Fatal(err)
			}
			var order []string
			for _, e := range hist {
				if name, ok := strings.CutPrefix(e.Event, "step_start deploy."); ok {
					order = append(order, name)
				}
			}
			pos := func(name string) int {
				for i, s := range order {
					if s == name {
						return i
					}
				}
				t.Fatalf("history lacks step_start deploy.%s (deploy steps started: %v)", name, order)
				return -1
			}
			if d, e, w := pos("deploy"), pos("erase_devices_metadata"), pos("write_image"); !(d < e && e < w) {
				t.Fatalf("deploy steps started in order %v, want deploy < erase_devices_metadata < write_image", order)
			}
			final, err := h.store.GetNode(h.ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := final.DriverInternalInfo["steps_validated"]; ok {
				t.Errorf("finished deploy kept steps_validated in driver_internal_info: %v", final.DriverInternalInfo)
			}
		})
	}
}

// TestDeployUnknownInBandUserStepFails checks that a user deploy step the
// agent does not report, skipped at deploy start while the agent was not
// booted, fails the deploy with the validation error once the agent's
// steps are known.
func TestDeployUnknownInBandUserStepFails(t *testing.T) {
	t.Parallel()
	rec := &agentRecorder{}
	h := newAgentHarness(t, conductor.Options{DisableAutomatedClean: true}, rec.factory)
	n := h.enrollAgentNode("inband-unknown-step")
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{DeploySteps: []steps.Step{
		{Interface: "deploy", Name: "burnin_gpu", Priority: 90},
	}}))
	f := h.waitFor(n.UUID, statemachine.DeployFailed)
	for _, want := range []string{"Failed to validate the final deploy steps list", "node does not support this deploy step", "burnin_gpu"} {
		if !strings.Contains(f.LastError, want) {
			t.Errorf("last_error = %q, want it to contain %q", f.LastError, want)
		}
	}
	for _, a := range rec.all() {
		if got := a.StepRuns(steps.Deploy, "deploy", "write_image"); got != 0 {
			t.Errorf("write_image ran %d times after the validation failure, want 0", got)
		}
	}
}
