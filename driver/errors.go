package driver

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors callers branch on with errors.Is. The rich error types
// below match them through their Is methods.
var (
	// ErrHardwareTypeNotFound means a node names a hardware type that is not
	// registered or not enabled (Ironic's DriverNotFound, HTTP 404).
	ErrHardwareTypeNotFound = errors.New("hardware type not found")
	// ErrInterfaceNotFound means a node names an implementation that is not
	// registered or not enabled for its kind (InterfaceNotFoundInEntrypoint,
	// HTTP 400).
	ErrInterfaceNotFound = errors.New("interface implementation not found")
	// ErrIncompatibleInterface means an implementation exists but the node's
	// hardware type does not support it (IncompatibleInterface, HTTP 400).
	ErrIncompatibleInterface = errors.New("interface implementation not supported by hardware type")
	// ErrNoValidDefault means no default implementation could be chosen for
	// a kind (NoValidDefaultForInterface).
	ErrNoValidDefault = errors.New("no valid default interface implementation")
	// ErrNoHardwareTypes means the registry configuration enables no
	// hardware type (NoDriversLoaded); a conductor refuses to start.
	ErrNoHardwareTypes = errors.New("no hardware types enabled")
	// ErrDuplicate means a name was registered twice.
	ErrDuplicate = errors.New("already registered")
	// ErrUnsupported means the operation is not supported by the
	// implementation (Ironic's UnsupportedDriverExtension); the no-op
	// implementations return it from every method.
	ErrUnsupported = errors.New("operation not supported")
	// ErrMissingParameter means a required driver_info (or instance_info)
	// value is absent (Ironic's MissingParameterValue).
	ErrMissingParameter = errors.New("missing parameter")
	// ErrInvalidParameter means a parameter is present but wrong (Ironic's
	// InvalidParameterValue).
	ErrInvalidParameter = errors.New("invalid parameter")
	// ErrStepNotFound means a step was asked of an interface that does not
	// provide it.
	ErrStepNotFound = errors.New("step not found")
	// ErrInjectedFailure is returned by the fake implementations when a
	// test asks them to fail.
	ErrInjectedFailure = errors.New("injected failure")
	// ErrUnavailable means an implementation cannot work on this host
	// because a prerequisite is missing (a tool not installed); see
	// UnavailableError and AvailabilityReporter.
	ErrUnavailable = errors.New("implementation unavailable")
)

// HardwareTypeNotFoundError says a hardware type is unknown or disabled and
// which ones are enabled.
type HardwareTypeNotFoundError struct {
	Name       string   // the requested hardware type
	Registered bool     // true when it is registered but not enabled
	Enabled    []string // the enabled hardware types
}

func (e *HardwareTypeNotFoundError) Error() string {
	if e.Registered {
		return fmt.Sprintf("driver: hardware type %q is registered but not enabled (enabled: %s); add it to the enabled hardware types",
			e.Name, quoteList(e.Enabled))
	}
	return fmt.Sprintf("driver: hardware type %q not found (enabled: %s)", e.Name, quoteList(e.Enabled))
}

// Is matches ErrHardwareTypeNotFound.
func (e *HardwareTypeNotFoundError) Is(target error) bool { return target == ErrHardwareTypeNotFound }

// InterfaceNotFoundError says an implementation name is unknown or disabled
// for a kind, and lists the valid (enabled) names for that kind.
type InterfaceNotFoundError struct {
	Kind       Kind
	Name       string
	Registered bool     // true when it is registered but not enabled
	Valid      []string // enabled implementations of Kind
}

func (e *InterfaceNotFoundError) Error() string {
	state := "not found"
	if e.Registered {
		state = "registered but not enabled"
	}
	msg := fmt.Sprintf("driver: %s interface %q %s; valid %s interfaces: %s",
		e.Kind, e.Name, state, e.Kind, quoteList(e.Valid))
	if hint := absentHint(e.Kind, e.Name); hint != "" {
		msg += "; " + hint
	}
	return msg
}

// absentHint says why an implementation Ironic has is absent from Anvil,
// for the errors that name it.
func absentHint(k Kind, name string) string {
	if k == KindStorage && name == "cinder" {
		return "cinder attaches volumes of OpenStack's Block Storage service (Cinder), which Anvil has no client for: use noop"
	}
	return ""
}

// Hint says why the implementation is absent when Anvil leaves out one
// that Ironic has (cinder), else "".
func (e *InterfaceNotFoundError) Hint() string { return absentHint(e.Kind, e.Name) }

// Is matches ErrInterfaceNotFound.
func (e *InterfaceNotFoundError) Is(target error) bool { return target == ErrInterfaceNotFound }

// IncompatibleInterfaceError says the hardware type does not support an
// implementation, and lists what it supports.
type IncompatibleInterfaceError struct {
	HardwareType string
	Kind         Kind
	Name         string
	Supported    []string
}

func (e *IncompatibleInterfaceError) Error() string {
	return fmt.Sprintf("driver: %s interface %q is not supported by hardware type %q (supported: %s)",
		e.Kind, e.Name, e.HardwareType, quoteList(e.Supported))
}

// Is matches ErrIncompatibleInterface.
func (e *IncompatibleInterfaceError) Is(target error) bool { return target == ErrIncompatibleInterface }

// NoValidDefaultError says no default implementation of Kind exists for
// HardwareType and what would fix it.
type NoValidDefaultError struct {
	HardwareType string
	Kind         Kind
	Node         string   // node UUID or name when known
	Configured   string   // the default_<kind>_interface setting, if any
	Supported    []string // what the hardware type supports, in order
	Enabled      []string // what is enabled for Kind
	Cause        error    // why the configured default was refused, if any
}

func (e *NoValidDefaultError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "driver: no default %s interface could be determined for hardware type %q", e.Kind, e.HardwareType)
	if e.Node != "" {
		fmt.Fprintf(&b, " (node %s)", e.Node)
	}
	if e.Configured != "" {
		fmt.Fprintf(&b, ": configured default %q is unusable", e.Configured)
		if e.Cause != nil {
			fmt.Fprintf(&b, " (%v)", e.Cause)
		}
	}
	fmt.Fprintf(&b, "; enable one of %s (enabled %s interfaces: %s)", quoteList(e.Supported), e.Kind, quoteList(e.Enabled))
	return b.String()
}

// Is matches ErrNoValidDefault.
func (e *NoValidDefaultError) Is(target error) bool { return target == ErrNoValidDefault }

// Unwrap returns the reason a configured default was refused.
func (e *NoValidDefaultError) Unwrap() error { return e.Cause }

// UnsupportedError says an implementation does not support an operation,
// or (Impl empty) that a node's driver has no interface of Kind at all.
type UnsupportedError struct {
	// Node is the node's UUID when the error concerns one node.
	Node      string
	Kind      Kind
	Impl      string
	Operation string
}

func (e *UnsupportedError) Error() string {
	var b strings.Builder
	if e.Node != "" {
		fmt.Fprintf(&b, "node %s: ", e.Node)
	}
	if e.Impl == "" {
		fmt.Fprintf(&b, "no %s interface: %s is not supported", e.Kind, e.Operation)
	} else {
		fmt.Fprintf(&b, "%s/%s: %s is not supported", e.Kind, e.Impl, e.Operation)
	}
	return b.String()
}

// Is matches ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// MissingParameterError says which required parameters a node lacks.
type MissingParameterError struct {
	Node    string // node UUID
	Kind    Kind
	Impl    string
	Field   string   // "driver_info", "instance_info", ...
	Missing []string // the missing keys
	// Hints says, by key, why a key that is not always required is
	// needed here (such as "a user name to go with redfish_password").
	Hints map[string]string `json:",omitempty"`
}

func (e *MissingParameterError) Error() string {
	keys := make([]string, len(e.Missing))
	for i, k := range e.Missing {
		keys[i] = k
		if h := e.Hints[k]; h != "" {
			keys[i] = k + " (" + h + ")"
		}
	}
	return fmt.Sprintf("%s/%s: node %s is missing required %s: %s", e.Kind, e.Impl, e.Node, e.Field, strings.Join(keys, ", "))
}

// Is matches ErrMissingParameter.
func (e *MissingParameterError) Is(target error) bool { return target == ErrMissingParameter }

// InvalidParameterError says a parameter has a wrong value and what was
// expected.
type InvalidParameterError struct {
	Node     string
	Kind     Kind
	Impl     string
	Field    string // "driver_info", "instance_info", "args", ...
	Key      string
	Expected string
}

func (e *InvalidParameterError) Error() string {
	return fmt.Sprintf("%s/%s: node %s has an invalid %s[%q]: expected %s", e.Kind, e.Impl, e.Node, e.Field, e.Key, e.Expected)
}

// Is matches ErrInvalidParameter.
func (e *InvalidParameterError) Is(target error) bool { return target == ErrInvalidParameter }

// StepNotFoundError says an interface does not provide a step.
type StepNotFoundError struct {
	Kind     Kind
	Impl     string
	StepKind string
	Step     string
}

func (e *StepNotFoundError) Error() string {
	return fmt.Sprintf("%s/%s: no %s step %q", e.Kind, e.Impl, e.StepKind, e.Step)
}

// Is matches ErrStepNotFound.
func (e *StepNotFoundError) Is(target error) bool { return target == ErrStepNotFound }

func quoteList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
