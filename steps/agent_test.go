package steps

import "testing"

func TestAgentOutcome(t *testing.T) {
	erase := Step{Interface: "deploy", Name: "erase_devices", Priority: 10, Abortable: true}
	rebooting := erase
	rebooting.RebootRequested = true
	other := Step{Interface: "deploy", Name: "erase_devices_metadata"}
	prog := func(cur Step, reboot bool) Progress {
		return Progress{Kind: Clean, Steps: []Step{cur}, Current: &cur, Index: ptrInt(0), Reboot: reboot}
	}
	exec := func(status string, result *Step) AgentCommand {
		return AgentCommand{Name: "execute_clean_step", Status: status, Error: "disk on fire", ResultStep: result}
	}
	tests := []struct {
		name     string
		prog     Progress
		commands []AgentCommand
		want     Outcome
		act      bool
	}{
		{"fresh boot after a reboot, no commands", prog(erase, true), nil, Outcome{Kind: AgentRebooted, Node: "n1"}, true},
		{"fresh boot after a reboot, only get_clean_steps", prog(erase, true), []AgentCommand{{Name: "get_clean_steps", Status: "SUCCEEDED"}}, Outcome{Kind: AgentRebooted, Node: "n1"}, true},
		{"no commands and no reboot", prog(erase, false), nil, Outcome{}, false},
		{"still running", prog(erase, false), []AgentCommand{exec("RUNNING", nil)}, Outcome{}, false},
		{"last command is not a step yet", prog(erase, false), []AgentCommand{{Name: "get_clean_steps", Status: "SUCCEEDED"}}, Outcome{}, false},
		{"deploy command during clean is not ours", prog(erase, false), []AgentCommand{{Name: "execute_deploy_step", Status: "SUCCEEDED"}}, Outcome{}, false},
		{"failed", prog(erase, false), []AgentCommand{exec("FAILED", &erase)}, Outcome{Kind: StepFailed, Node: "n1", Err: "disk on fire", FromAgent: true}, true},
		{"clean version mismatch", prog(erase, false), []AgentCommand{exec("CLEAN_VERSION_MISMATCH", nil)}, Outcome{Kind: VersionMismatch, Node: "n1"}, true},
		{"version mismatch alias", prog(erase, false), []AgentCommand{exec("VERSION_MISMATCH", nil)}, Outcome{Kind: VersionMismatch, Node: "n1"}, true},
		{"succeeded", prog(erase, false), []AgentCommand{{Name: "get_clean_steps", Status: "SUCCEEDED"}, exec("SUCCEEDED", &erase)}, Outcome{Kind: StepDone, Node: "n1"}, true},
		{"succeeded without a result step", prog(erase, false), []AgentCommand{exec("SUCCEEDED", nil)}, Outcome{Kind: StepDone, Node: "n1"}, true},
		{"late result of another step is ignored", prog(erase, false), []AgentCommand{exec("SUCCEEDED", &other)}, Outcome{}, false},
		{"reboot requested by the current step", prog(rebooting, false), []AgentCommand{exec("SUCCEEDED", &erase)}, Outcome{Kind: RebootRequested, Node: "n1"}, true},
		{"reboot requested in the result", prog(erase, false), []AgentCommand{exec("SUCCEEDED", &rebooting)}, Outcome{Kind: RebootRequested, Node: "n1"}, true},
		{"unknown status", prog(erase, false), []AgentCommand{exec("EXPLODED", nil)}, Outcome{Kind: StepFailed, Node: "n1", FromAgent: true, AgentStatus: "EXPLODED"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, act := AgentOutcome(tc.prog, "n1", tc.commands)
			if act != tc.act || got != tc.want {
				t.Fatalf("AgentOutcome = %+v, %v; want %+v, %v", got, act, tc.want, tc.act)
			}
		})
	}
	planner := mustPlanner(t, Config{})
	o, _ := AgentOutcome(prog(erase, false), "n1", []AgentCommand{exec("EXPLODED", nil)})
	a := planner.Decide(prog(erase, false), o)
	const want = "Agent returned unknown status for clean step {'interface': 'deploy', 'step': 'erase_devices', 'priority': 10} on node n1 : EXPLODED."
	if a.Kind != Fail || a.Message != want {
		t.Fatalf("Decide = %v %q, want fail %q", a.Kind, a.Message, want)
	}
}
