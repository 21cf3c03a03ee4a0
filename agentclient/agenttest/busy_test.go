package agenttest_test

import (
	"net/http/httptest"
	"testing"

	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/steps"
)

// TestAgentScriptedBusy checks that a Busy count makes the agent refuse a
// step with 409 "Agent is busy" that many times without running it, then
// accept and run it once.
func TestAgentScriptedBusy(t *testing.T) {
	a := agenttest.NewAgent(agenttest.AgentConfig{Token: tok})
	defer a.Close()
	srv := httptest.NewServer(a)
	defer srv.Close()
	a.SetStepBehavior(steps.Clean, "deploy", "erase_devices", agenttest.Behavior{Busy: 2})
	for i := range 2 {
		code, body := call(t, "POST", srv.URL+"/v1/commands/?agent_token="+tok, cleanStep)
		if code != 409 {
			t.Fatalf("request %d: status %d, want 409", i, code)
		}
		if f, _ := body["faultstring"].(string); f == "" {
			t.Errorf("request %d: 409 without a faultstring: %v", i, body)
		}
	}
	if runs := a.StepRuns(steps.Clean, "deploy", "erase_devices"); runs != 0 {
		t.Fatalf("refused step ran %d times", runs)
	}
	code, body := call(t, "POST", srv.URL+"/v1/commands/?agent_token="+tok+"&wait=true", cleanStep)
	if code != 200 || body["command_status"] != "SUCCEEDED" {
		t.Fatalf("third request: status %d body %v, want 200 SUCCEEDED", code, body)
	}
	if runs, busy := a.StepRuns(steps.Clean, "deploy", "erase_devices"), a.BusyAnswers(); runs != 1 || busy != 2 {
		t.Fatalf("step runs %d busy answers %d, want 1 and 2", runs, busy)
	}
}
