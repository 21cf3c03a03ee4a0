package steps

// Command statuses the agent (IPA) reports for a command.
const (
	AgentStatusRunning              = "RUNNING"
	AgentStatusSucceeded            = "SUCCEEDED"
	AgentStatusFailed               = "FAILED"
	AgentStatusCleanVersionMismatch = "CLEAN_VERSION_MISMATCH"
	// AgentStatusVersionMismatch and AgentStatusDeployVersionMismatch are
	// aliases Ironic accepts as well.
	AgentStatusVersionMismatch       = "VERSION_MISMATCH"
	AgentStatusDeployVersionMismatch = "DEPLOY_VERSION_MISMATCH"
)

// AgentCommand is the part of one entry of the agent's command list
// (GET /v1/commands) that decides what happens to the current step.
type AgentCommand struct {
	// Name is command_name, e.g. "execute_clean_step".
	Name string
	// Status is command_status.
	Status string
	// Error is command_error rendered as text (for FAILED).
	Error string
	// ResultStep is command_result.<kind>_step, the step the command ran,
	// when the agent reported it.
	ResultStep *Step
}

// ExecuteCommand returns the agent command that runs a step of the kind
// ("execute_clean_step", ...).
func (k Kind) ExecuteCommand() string { return "execute_" + string(k) + "_step" }

// StepsCommand returns the agent command that lists steps of the kind
// ("get_clean_steps", ...).
func (k Kind) StepsCommand() string { return "get_" + string(k) + "_steps" }

// AgentOutcome reads the agent's command list on a heartbeat, as Ironic's
// process_next_step does, and returns the outcome to pass to Decide, or
// false when there is nothing to do yet:
//
//   - while the reboot flag is set, an agent with no commands, or with only
//     get_<kind>_steps, has freshly booted: AgentRebooted;
//   - otherwise nothing happens unless the last command is
//     execute_<kind>_step and has finished;
//   - a SUCCEEDED result for another step than the current one is a late
//     report from an earlier step and is ignored;
//   - FAILED fails the step with the agent's error, a version mismatch
//     status gives VersionMismatch, SUCCEEDED gives RebootRequested when
//     the step asked for a reboot and StepDone otherwise, and any other
//     status fails the step as unknown.
func AgentOutcome(prog Progress, node string, commands []AgentCommand) (Outcome, bool) {
	if prog.Reboot && (len(commands) == 0 || (len(commands) == 1 && commands[0].Name == prog.Kind.StepsCommand())) {
		return Outcome{Kind: AgentRebooted, Node: node}, true
	}
	if len(commands) == 0 {
		return Outcome{}, false
	}
	last := commands[len(commands)-1]
	if last.Name != prog.Kind.ExecuteCommand() || last.Status == AgentStatusRunning {
		return Outcome{}, false
	}
	switch last.Status {
	case AgentStatusFailed:
		return Outcome{Kind: StepFailed, Node: node, Err: last.Error, FromAgent: true}, true
	case AgentStatusCleanVersionMismatch, AgentStatusVersionMismatch, AgentStatusDeployVersionMismatch:
		return Outcome{Kind: VersionMismatch, Node: node}, true
	case AgentStatusSucceeded:
		if last.ResultStep != nil && prog.Current != nil &&
			(last.ResultStep.Interface != prog.Current.Interface || last.ResultStep.Name != prog.Current.Name) {
			return Outcome{}, false
		}
		if (prog.Current != nil && prog.Current.RebootRequested) || (last.ResultStep != nil && last.ResultStep.RebootRequested) {
			return Outcome{Kind: RebootRequested, Node: node}, true
		}
		return Outcome{Kind: StepDone, Node: node}, true
	}
	return Outcome{Kind: StepFailed, Node: node, FromAgent: true, AgentStatus: last.Status}, true
}
