package steps

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors callers branch on with errors.Is. The typed errors of
// this package wrap one of them.
var (
	// ErrInvalidMetadata reports a step declared with metadata Ironic's
	// decorators would refuse (see MetadataError).
	ErrInvalidMetadata = errors.New("steps: invalid step metadata")
	// ErrInvalidSteps reports user, runbook or template steps that failed
	// validation against the node's driver (see ValidationError); Ironic
	// answers these with InvalidParameterValue, HTTP 400.
	ErrInvalidSteps = errors.New("steps: invalid steps")
	// ErrStepNotAllowed reports a user step on a disallow list; a
	// ValidationError holding such a problem matches it too.
	ErrStepNotAllowed = errors.New("steps: step not allowed")
	// ErrNoDeploySteps reports a deploy plan that ended up empty.
	ErrNoDeploySteps = errors.New("steps: no deploy steps")
	// ErrInvalidStepList reports a malformed user step list (see
	// ParseError).
	ErrInvalidStepList = errors.New("steps: invalid step list")
	// ErrInvalidProgress reports progress keys in driver_internal_info that
	// cannot be read (see ProgressError).
	ErrInvalidProgress = errors.New("steps: invalid progress")
	// ErrInvalidConfig reports a Config that NewPlanner refuses.
	ErrInvalidConfig = errors.New("steps: invalid configuration")
	// ErrUnsupportedKind reports an operation asked for a kind that does
	// not support it (for example progress for verify steps).
	ErrUnsupportedKind = errors.New("steps: unsupported step kind")
)

// MetadataError describes a step declaration that was refused.
type MetadataError struct {
	Kind      Kind
	Interface string
	Step      string
	// Field names the offending metadata: "kind", "interface", "step",
	// "priority", "argsinfo", "argsinfo.<arg>", "abortable" or
	// "requires_ramdisk".
	Field string
	// Problem says what was expected.
	Problem string
}

func (e *MetadataError) Error() string {
	return fmt.Sprintf("steps: invalid %s step %s.%s: %s: %s", e.Kind, e.Interface, e.Step, e.Field, e.Problem)
}

// Unwrap returns ErrInvalidMetadata.
func (e *MetadataError) Unwrap() error { return ErrInvalidMetadata }

// ProblemCode classifies one problem of a ValidationError.
type ProblemCode string

// The validation problems Ironic reports for user steps.
const (
	ProblemUnknownStep    ProblemCode = "unknown_step"
	ProblemUnexpectedArgs ProblemCode = "unexpected_args"
	ProblemMissingArgs    ProblemCode = "missing_args"
	ProblemNeedsRamdisk   ProblemCode = "requires_ramdisk"
	ProblemCoreStep       ProblemCode = "core_step"
	ProblemDuplicates     ProblemCode = "duplicate_steps"
	ProblemNotAllowed     ProblemCode = "not_allowed"
)

// Origin says where validated steps came from; Ironic words its error
// prefix after it.
type Origin string

// The origins of steps that are validated.
const (
	OriginUser     Origin = "user"
	OriginRunbook  Origin = "runbook"
	OriginTemplate Origin = "template"
)

// Problem is one validation failure.
type Problem struct {
	Code   ProblemCode `json:"code"`
	Origin Origin      `json:"origin"`
	// Step is the offending step as the user gave it (empty for
	// ProblemDuplicates).
	Step Step `json:"step"`
	// Names lists the unexpected or missing argument names, or the
	// duplicated "interface.step" keys.
	Names []string `json:"names,omitempty"`
	// Message is Ironic's wording of the problem.
	Message string `json:"message"`
}

// ValidationError gathers every problem found in one request, as Ironic
// joins them into a single InvalidParameterValue.
type ValidationError struct {
	Kind     Kind
	Problems []Problem
	// Templates names the matching deploy templates, for the prefix of
	// template problems.
	Templates []string
}

// Message returns the text Ironic would put in InvalidParameterValue:
// per origin an optional prefix and the problems joined with "; "
// (origins are joined the same way). When both the user's deploy steps
// and deploy template steps are invalid, Ironic reports the user's steps
// only (it validates the templates after the user's steps succeeded);
// Anvil reports both, so one request shows every problem.
func (e *ValidationError) Message() string {
	var groups []string
	for _, o := range []Origin{OriginUser, OriginRunbook, OriginTemplate} {
		var msgs []string
		for _, p := range e.Problems {
			if p.Origin == o {
				msgs = append(msgs, p.Message)
			}
		}
		if len(msgs) == 0 {
			continue
		}
		prefix := ""
		if e.Kind == Deploy {
			switch o {
			case OriginUser:
				// Ironic's prefix ends at the full stop: no space follows it.
				prefix = `Validation of deploy steps from "deploy steps" argument failed.`
			case OriginTemplate:
				prefix = "Validation of deploy steps from deploy templates matching this node's instance traits failed. Matching deploy templates: " +
					strings.Join(e.Templates, ",") + ". Errors: "
			}
		}
		groups = append(groups, prefix+strings.Join(msgs, "; "))
	}
	return strings.Join(groups, "; ")
}

func (e *ValidationError) Error() string { return "steps: " + e.Message() }

// Is makes errors.Is match ErrInvalidSteps always, and ErrStepNotAllowed
// when a problem is a disallowed step.
func (e *ValidationError) Is(target error) bool {
	if target == ErrInvalidSteps {
		return true
	}
	if target == ErrStepNotAllowed {
		for _, p := range e.Problems {
			if p.Code == ProblemNotAllowed {
				return true
			}
		}
	}
	return false
}

// Has reports whether the error holds a problem with the given code.
func (e *ValidationError) Has(code ProblemCode) bool {
	for _, p := range e.Problems {
		if p.Code == code {
			return true
		}
	}
	return false
}

// ParseProblem is one defect of a user step list.
type ParseProblem struct {
	// Index is the position of the step in the list, or -1 for the list
	// itself.
	Index int `json:"index"`
	// Field is the offending key ("" for the whole step or list).
	Field string `json:"field,omitempty"`
	// Problem says what was expected.
	Problem string `json:"problem"`
}

// ParseError lists every defect found in a user step list.
type ParseError struct {
	Kind     Kind
	Problems []ParseProblem
}

func (e *ParseError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		switch {
		case p.Index < 0:
			parts[i] = p.Problem
		case p.Field == "":
			parts[i] = fmt.Sprintf("step %d: %s", p.Index, p.Problem)
		default:
			parts[i] = fmt.Sprintf("step %d: %s: %s", p.Index, p.Field, p.Problem)
		}
	}
	return fmt.Sprintf("steps: invalid %s step list: %s", e.Kind, strings.Join(parts, "; "))
}

// Unwrap returns ErrInvalidStepList.
func (e *ParseError) Unwrap() error { return ErrInvalidStepList }

// ProgressError names a driver_internal_info key that could not be read.
type ProgressError struct {
	Kind Kind
	Key  string
	Err  error
}

func (e *ProgressError) Error() string {
	return fmt.Sprintf("steps: invalid %s progress: driver_internal_info %q: %v", e.Kind, e.Key, e.Err)
}

// Unwrap returns ErrInvalidProgress and the decoding error.
func (e *ProgressError) Unwrap() []error { return []error{ErrInvalidProgress, e.Err} }

// NoDeployStepsError reports an empty deploy plan.
type NoDeployStepsError struct {
	// Disabled lists the driver steps disabled by priority-0 user or
	// template steps, to help explain the empty result.
	Disabled []string
}

func (e *NoDeployStepsError) Error() string {
	msg := "steps: no deploy steps to run: the driver has no enabled deploy steps and none were requested"
	if len(e.Disabled) > 0 {
		msg += " (disabled by priority 0: " + strings.Join(e.Disabled, ", ") + ")"
	}
	return msg
}

// Unwrap returns ErrNoDeploySteps.
func (e *NoDeployStepsError) Unwrap() error { return ErrNoDeploySteps }
