package baremetal_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
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
	mgr := agenttest.GenericHardwareManager()
	exact := steps.Step{Interface: "deploy", Name: "burnin_exact", Priority: 0, Abortable: true,
		ArgsInfo: map[string]steps.ArgInfo{
			"count":  {Description: "An integer above 2^53.", Required: true},
			"ratio":  {Description: "A float written 1.0.", Required: true},
			"nested": {Description: "Numbers inside a list and an object."},
		}}
	mgr.CleanSteps = append(mgr.CleanSteps, exact)
	var agents []*agenttest.Agent
	h := newAgentHarness(t, baremetal.Options{}, func(string) *agenttest.Agent {
		a := agenttest.NewAgent(agenttest.AgentConfig{HardwareManagers: []agenttest.HardwareManager{mgr}})
		agents = append(agents, a)
		return a
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
	if err := h.c.Clean(h.ctx, n.UUID, user, baremetal.CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	var body []byte
	for _, a := range agents {
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
