package driver

import (
	"context"

	"github.com/anvilmetal/anvil/steps"
)

// StepResult is what running a step (or another possibly asynchronous
// operation such as Deploy or InspectHardware) returns. The zero value
// means the step is done.
type StepResult struct {
	// Wait means the step continues asynchronously: the node goes to the
	// wait state of the operation and the step is resumed on an agent
	// heartbeat or a poll (Ironic returns CLEANWAIT/DEPLOYWAIT/SERVICEWAIT).
	Wait bool `json:"wait,omitempty"`
	// RebootRequested asks the conductor to reboot the node once the step
	// completes (Ironic's cleaning_reboot / deployment_reboot).
	RebootRequested bool `json:"reboot_requested,omitempty"`
	// SkipCurrentStep says that, on resume, the current step must not be
	// re-run (Ironic's skip_current_*_step, default true in Ironic when
	// waiting on the agent).
	SkipCurrentStep bool `json:"skip_current_step,omitempty"`
	// Polling says the conductor itself polls the step for completion
	// rather than waiting for an agent heartbeat (Ironic's *_polling).
	Polling bool `json:"polling,omitempty"`
	// AgentCommand is the ID of the agent command a waiting step handed
	// its work to (the answer to execute_<kind>_step). With the
	// conductor's AgentSettings.PollCommands the conductor waits on that
	// command and resumes the step the moment it ends, instead of at the
	// agent's next heartbeat. It is optional: without it the heartbeats
	// resume the step. Over the plugin boundary it is an optional JSON
	// field: a peer of the previous protocol ignores it, and then the
	// heartbeats resume the step.
	AgentCommand string `json:"agent_command,omitempty"`
}

// Done reports whether the step finished.
func (r StepResult) Done() bool { return !r.Wait }

// StepProvider is an optional capability of any implementation that has
// steps. Steps returns the steps of the given kind with Interface set to
// the implementation's kind; it is static metadata (the Go stand-in for
// Ironic's step decorators) and the caller owns the returned slice.
// In-band (agent) steps are merged by the conductor, not here.
type StepProvider interface {
	Steps(kind steps.Kind) []steps.Step
}

// StepRunner is an optional capability of any implementation that has
// steps: it runs one of them. step carries the arguments in step.Args. It
// returns an *UnsupportedError wrapped error or a *StepNotFoundError for a
// step it does not provide.
type StepRunner interface {
	ExecuteStep(ctx context.Context, t *Task, kind steps.Kind, step steps.Step) (StepResult, error)
}
