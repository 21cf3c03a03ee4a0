package agentclient

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers branch on these with errors.Is; the rich types
// below carry the details.
var (
	// ErrNodeNotFound is returned by a Backend when no node matches a
	// lookup or heartbeat.
	ErrNodeNotFound = errors.New("agentclient: node not found")
	// ErrNodeLocked is returned by a Backend when the node is reserved by
	// another conductor and the operation may not wait for it. The handler
	// answers 409 so that the agent backs off and retries.
	ErrNodeLocked = errors.New("agentclient: node locked")

	// ErrAgentBusy means the agent is running another command (HTTP 409 or
	// a fault saying "agent is busy"). Ironic treats it as "try the same
	// step again on the next heartbeat", never as a failure.
	ErrAgentBusy = errors.New("agentclient: agent is busy")
	// ErrConnectionFailed means the agent could not be reached (refused,
	// reset, timed out, TLS failure) after every attempt.
	ErrConnectionFailed = errors.New("agentclient: connection to agent failed")
	// ErrAgentAPI means the agent answered with an HTTP error other than
	// busy, or with a body that is not a valid answer.
	ErrAgentAPI = errors.New("agentclient: agent API error")
	// ErrCommandFailed means a command finished with status FAILED; the
	// agent's command_error is in the CommandError.
	ErrCommandFailed = errors.New("agentclient: agent command failed")
	// ErrVersionMismatch means the agent refused a step because its
	// hardware managers changed since the steps were fetched
	// (CLEAN_VERSION_MISMATCH or VERSION_MISMATCH).
	ErrVersionMismatch = errors.New("agentclient: hardware manager version mismatch")
	// ErrCommandTimeout means a polled command was still running after
	// command_wait_attempts polls.
	ErrCommandTimeout = errors.New("agentclient: timed out waiting for agent command")
	// ErrInvalidArgument means the caller passed something the client
	// refuses to send (no URL, bad certificate, malformed command name).
	ErrInvalidArgument = errors.New("agentclient: invalid argument")
)

// APIError is an HTTP error answer from the agent. It matches ErrAgentBusy
// when the agent said it is busy and ErrAgentAPI otherwise.
type APIError struct {
	Node    string // node UUID, when the caller named it
	Command string // full command name, e.g. clean.execute_clean_step, or the request path
	Status  int    // HTTP status code
	Fault   string // faultstring from the agent, or the raw body when it was not JSON
	busy    bool
}

func (e *APIError) Error() string {
	return fmt.Sprintf("agentclient: node %s: %s: agent answered HTTP %d: %s", orUnknown(e.Node), e.Command, e.Status, e.Fault)
}

// Is makes errors.Is(err, ErrAgentBusy) or errors.Is(err, ErrAgentAPI) true.
func (e *APIError) Is(target error) bool {
	if e.busy {
		return target == ErrAgentBusy
	}
	return target == ErrAgentAPI
}

// ConnectionError is a failure to reach the agent. It matches
// ErrConnectionFailed and unwraps to the transport error.
type ConnectionError struct {
	Node     string
	Command  string
	URL      string // the agent URL, without the token
	Attempts int
	Err      error
}

func (e *ConnectionError) Error() string {
	return fmt.Sprintf("agentclient: node %s: %s: cannot reach agent at %s after %d attempt(s): %v", orUnknown(e.Node), e.Command, e.URL, e.Attempts, e.Err)
}

// Is makes errors.Is(err, ErrConnectionFailed) true.
func (e *ConnectionError) Is(target error) bool { return target == ErrConnectionFailed }

// Unwrap returns the transport error.
func (e *ConnectionError) Unwrap() error { return e.Err }

// CommandError is a command the agent ran and reported as failed or as a
// version mismatch. It matches ErrCommandFailed or ErrVersionMismatch.
type CommandError struct {
	Node    string
	Command string        // full command name
	ID      string        // agent's command id
	Status  CommandStatus // FAILED, CLEAN_VERSION_MISMATCH or VERSION_MISMATCH
	Agent   *AgentError   // the agent's command_error, when it sent one
}

func (e *CommandError) Error() string {
	what := "failed"
	if e.Status.IsVersionMismatch() {
		what = "refused: hardware manager version mismatch"
	}
	detail := "no error details"
	if e.Agent != nil {
		detail = e.Agent.String()
	}
	return fmt.Sprintf("agentclient: node %s: command %s (%s) %s: %s", orUnknown(e.Node), e.Command, e.ID, what, detail)
}

// Is makes errors.Is(err, ErrCommandFailed) or errors.Is(err,
// ErrVersionMismatch) true.
func (e *CommandError) Is(target error) bool {
	if e.Status.IsVersionMismatch() {
		return target == ErrVersionMismatch
	}
	return target == ErrCommandFailed
}

// PollTimeoutError is a polled command that did not finish in time. It
// matches ErrCommandTimeout.
type PollTimeoutError struct {
	Node     string
	Command  string
	Attempts int
}

func (e *PollTimeoutError) Error() string {
	return fmt.Sprintf("agentclient: node %s: command %s still running after %d polls", orUnknown(e.Node), e.Command, e.Attempts)
}

// Is makes errors.Is(err, ErrCommandTimeout) true.
func (e *PollTimeoutError) Is(target error) bool { return target == ErrCommandTimeout }

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
