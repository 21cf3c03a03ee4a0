package conductor_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// TestStepArgumentsKeepExactNumbers follows user step arguments from the
// API's JSON (ParseUserSteps) through the conductor, the SQLite store and
// the agent client to the fake IPA: 9007199254740993 (above 2^53) and 1.0
// must arrive in the execute_clean_step body byte for byte, as IPA (in
// Python) would read them. Before, they passed through float64 and
// arrived as 9007199254740992 and 1.
func TestStepArgumentsKeepExactNumbers(t *testing.T) {
	t.Parallel()
	mgr := agenttest.GenericHardwareManager()
	exact := steps.Step{Interface: "deploy", Name: "burnin_exact", Priority: 0, Abortable: true,
		ArgsInfo: map[string]steps.ArgInfo{
			"count":  {Description: "An integer above 2^53.", Required: true},
			"ratio":  {Description: "A float written 1.0.", Required: true},
			"nested": {Description: "Numbers inside a list and an object."},
		}}
	mgr.CleanSteps = append(mgr.CleanSteps, exact)
	rec := &agentRecorder{} // the fleet's goroutines build the agents
	h := newAgentHarness(t, conductor.Options{}, func(string) *agenttest.Agent {
		return rec.add(agenttest.NewAgent(agenttest.AgentConfig{HardwareManagers: []agenttest.HardwareManager{mgr}}))
	})
	n := h.enrollAgentNode("exact-args")
	if err := h.c.Manage(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	user, err := steps.ParseUserSteps(steps.Clean, []byte(`[{"interface": "deploy", "step": "burnin_exact",
		"args": {"count": 9007199254740993, "ratio": 1.0, "nested": [2.50, {"x": -9007199254740995}]}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.Clean(h.ctx, n.UUID, user, conductor.CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	var body []byte
	for _, a := range rec.all() {
		for _, e := range a.Executed() {
			if e.Command == "clean.execute_clean_step" && e.Step != nil && e.Step.Name == "burnin_exact" {
				body = e.Body
			}
		}
	}
	if body == nil {
		t.Fatal("the agent never ran deploy.burnin_exact")
	}
	// The step as the agent received it, byte for byte.
	var req struct {
		Params struct {
			Step json.RawMessage `json:"step"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("execute_clean_step body: %v", err)
	}
	for _, want := range []string{`"count":9007199254740993`, `"ratio":1.0`, `"nested":[2.50,{"x":-9007199254740995}]`} {
		if !bytes.Contains(req.Params.Step, []byte(want)) {
			t.Errorf("the step sent to the agent lacks %s: %s", want, req.Params.Step)
		}
	}
}

// TestDeployStepArgumentsKeepExactNumbers is the deploy path of
// TestStepArgumentsKeepExactNumbers: a user deploy step for an in-band
// step, validated before the agent booted, stored as user_deploy_steps,
// planned once the agent reported its steps and sent to the fake IPA
// with its numbers as the user wrote them.
func TestDeployStepArgumentsKeepExactNumbers(t *testing.T) {
	t.Parallel()
	mgr := agenttest.GenericHardwareManager()
	mgr.DeploySteps = append(mgr.DeploySteps, steps.Step{Interface: "deploy", Name: "burnin_exact", Priority: 0, Abortable: true,
		ArgsInfo: map[string]steps.ArgInfo{"count": {Description: "An integer above 2^53.", Required: true}, "ratio": {Description: "A float written 1.0."}}})
	rec := &agentRecorder{} // the fleet's goroutines build the agents
	h := newAgentHarness(t, conductor.Options{}, func(string) *agenttest.Agent {
		return rec.add(agenttest.NewAgent(agenttest.AgentConfig{HardwareManagers: []agenttest.HardwareManager{mgr}}))
	})
	n := h.enrollAgentNode("exact-deploy-args")
	if err := h.c.Manage(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	if err := h.c.Provide(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Available)
	user, err := steps.ParseUserSteps(steps.Deploy, []byte(`[{"interface": "deploy", "step": "burnin_exact", "priority": 85,
		"args": {"count": 9007199254740993, "ratio": 1.0}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{DeploySteps: user}); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Active)
	var sent json.RawMessage
	for _, a := range rec.all() {
		for _, e := range a.Executed() {
			if e.Command == "deploy.execute_deploy_step" && e.Step != nil && e.Step.Name == "burnin_exact" {
				var req struct {
					Params struct {
						Step json.RawMessage `json:"step"`
					} `json:"params"`
				}
				if err := json.Unmarshal(e.Body, &req); err != nil {
					t.Fatal(err)
				}
				sent = req.Params.Step
			}
		}
	}
	if sent == nil {
		t.Fatal("the agent never ran deploy.burnin_exact")
	}
	for _, want := range []string{`"count":9007199254740993`, `"ratio":1.0`} {
		if !bytes.Contains(sent, []byte(want)) {
			t.Errorf("the deploy step sent to the agent lacks %s: %s", want, sent)
		}
	}
}
