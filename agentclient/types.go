package agentclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/anvilmetal/anvil/steps"
)

// CommandStatus is an IPA command_status value.
type CommandStatus string

// The command statuses IPA reports. VersionMismatch is the alias Ironic
// also accepts.
const (
	StatusRunning              CommandStatus = "RUNNING"
	StatusSucceeded            CommandStatus = "SUCCEEDED"
	StatusFailed               CommandStatus = "FAILED"
	StatusCleanVersionMismatch CommandStatus = "CLEAN_VERSION_MISMATCH"
	StatusVersionMismatch      CommandStatus = "VERSION_MISMATCH"
)

// IsVersionMismatch reports whether s is one of the two mismatch statuses.
func (s CommandStatus) IsVersionMismatch() bool {
	return s == StatusCleanVersionMismatch || s == StatusVersionMismatch
}

// Done reports whether the command has finished, whatever its outcome.
func (s CommandStatus) Done() bool { return s != StatusRunning }

// CommandResult is IPA's command result object, the same shape in the POST
// answer, in GET /v1/commands/{id} and in the command list.
type CommandResult struct {
	ID string `json:"id"`
	// Name is the command name without the extension (IPA's
	// command_name), e.g. "execute_clean_step".
	Name   string          `json:"command_name"`
	Params map[string]any  `json:"command_params,omitempty"`
	Status CommandStatus   `json:"command_status"`
	Error  *AgentError     `json:"command_error"`
	Result json.RawMessage `json:"command_result"`
}

// DecodeResult decodes the command_result into v. A null or absent result
// leaves v untouched.
func (r *CommandResult) DecodeResult(v any) error {
	if len(r.Result) == 0 || bytes.Equal(bytes.TrimSpace(r.Result), []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(r.Result, v); err != nil {
		return fmt.Errorf("%w: command %s (%s): command_result: %v", ErrAgentAPI, r.Name, r.ID, err)
	}
	return nil
}

// AgentError is IPA's serialised error (command_error): a RESTError with
// type, code, message and details. IPA sometimes sends a bare string or an
// object with only "error"; both decode into Message.
type AgentError struct {
	Type    string `json:"type,omitempty"`
	Code    int    `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Details string `json:"details,omitempty"`
}

// String renders the error the way IPA prints a RESTError.
func (e *AgentError) String() string {
	if e == nil {
		return ""
	}
	s := e.Message
	if e.Details != "" {
		if s != "" {
			s += ": "
		}
		s += e.Details
	}
	if e.Type != "" {
		s = e.Type + ": " + s
	}
	return s
}

// UnmarshalJSON accepts IPA's RESTError object, an {"error": "..."} object
// and a bare string.
func (e *AgentError) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*e = AgentError{Message: s}
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("command_error must be an object or a string: %w", err)
	}
	out := AgentError{}
	str := func(key string) string {
		v, ok := raw[key]
		if !ok {
			return ""
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		return string(v) // a non-string detail (IPA may send a dict) is kept as JSON text
	}
	out.Type = str("type")
	out.Message = str("message")
	out.Details = str("details")
	if out.Message == "" {
		out.Message = str("error")
	}
	if v, ok := raw["code"]; ok {
		var n json.Number
		if err := json.Unmarshal(v, &n); err == nil {
			if i, err := strconv.Atoi(n.String()); err == nil {
				out.Code = i
			}
		} else {
			var s string
			if json.Unmarshal(v, &s) == nil {
				out.Code, _ = strconv.Atoi(s)
			}
		}
	}
	*e = out
	return nil
}

// commandList is the body of GET /v1/commands.
type commandList struct {
	Commands []CommandResult `json:"commands"`
}

// AgentStatus is the body of GET /v1/status.
type AgentStatus struct {
	StartedAt float64 `json:"started_at"`
	Version   string  `json:"version"`
}

// StepsResult is the answer to get_clean_steps, get_deploy_steps and
// get_service_steps: the steps each hardware manager offers, keyed by the
// manager's class name, and the manager versions to pass back with each
// execute call.
type StepsResult struct {
	Steps                  map[string][]steps.Step
	HardwareManagerVersion map[string]string
}

// StepResult is the answer of execute_clean_step, execute_deploy_step and
// execute_service_step: the step as the agent ran it and what it returned
// (clean_result, deploy_result or service_result).
type StepResult struct {
	Step   steps.Step
	Result json.RawMessage
}

// PartitionUUIDs is the answer to standby.get_partition_uuids. The keys are
// IPA's ("root uuid", "efi system partition uuid", "PReP Boot partition
// uuid", "partitions"); Root, EFISystemPartition and PReP pick the common
// ones out, All keeps every key.
type PartitionUUIDs struct {
	Root               string
	EFISystemPartition string
	PReP               string
	All                map[string]any
}

// InstallBootloaderArgs are the parameters of image.install_bootloader.
type InstallBootloaderArgs struct {
	RootUUID          string
	EFISystemPartUUID string
	PRePBootPartUUID  string
	// TargetBootMode is "uefi" or "bios"; the call is retried without it
	// when the agent is too old to accept it, except in UEFI mode for a
	// software RAID (SoftwareRAID), where the agent would build a BIOS
	// layout: that fails with the agent's error, as in Ironic.
	TargetBootMode string
	// SoftwareRAID says the image was written onto a software RAID
	// (Ironic's software_raid argument); it is not sent.
	SoftwareRAID bool
}
