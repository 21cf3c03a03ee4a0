package statemachine

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors callers branch on with errors.Is. The typed errors below
// wrap or match them and carry the details.
var (
	// ErrInvalidTransition reports an event that the current state does
	// not accept. It is matched by every *TransitionError.
	ErrInvalidTransition = errors.New("statemachine: invalid transition")

	// ErrUnknownEvent reports an event name the machine never registered.
	// It is matched by a *TransitionError whose event is unknown.
	ErrUnknownEvent = errors.New("statemachine: unknown event")

	// ErrUnknownState reports a state name the machine never registered.
	// It is matched by every *UnknownStateError.
	ErrUnknownState = errors.New("statemachine: unknown state")

	// ErrInvalidTarget reports a target state that is not registered or
	// not stable. It is matched by every *TargetError.
	ErrInvalidTarget = errors.New("statemachine: invalid target state")

	// ErrInvalidDefinition reports a machine definition that cannot be
	// built. It is matched by every *DefinitionError.
	ErrInvalidDefinition = errors.New("statemachine: invalid definition")

	// ErrUnknownVerb reports a provision verb that Ironic's API does not
	// know. It is matched by every *VerbError.
	ErrUnknownVerb = errors.New("statemachine: unknown verb")

	// ErrMissingInput reports a verb sent without an input it requires
	// (steps for clean and service, a password for rescue). It is matched
	// by every *InputError.
	ErrMissingInput = errors.New("statemachine: missing verb input")

	// ErrUnknownPowerState reports a power state string outside Ironic's
	// set. It is matched by every *PowerStateError.
	ErrUnknownPowerState = errors.New("statemachine: unknown power state")
)

// TransitionError is returned when an event is refused in a state. It names
// the state the node is in, the refused event, and the events that state
// does accept, so that a caller can print an actionable message.
type TransitionError struct {
	// Machine is the name of the machine that refused the event.
	Machine string
	// State is the current state the event was refused in.
	State State
	// Event is the refused event.
	Event Event
	// Allowed lists the events State accepts, in the machine's event
	// order. It is empty for a state with no way out.
	Allowed []Event
	// UnknownEvent is true when Event is not registered in the machine at
	// all, as opposed to registered but not accepted in State.
	UnknownEvent bool
}

// Error describes the refusal, including the allowed events.
func (e *TransitionError) Error() string {
	var b strings.Builder
	b.WriteString("statemachine: ")
	if e.Machine != "" {
		b.WriteString(e.Machine)
		b.WriteString(": ")
	}
	if e.UnknownEvent {
		fmt.Fprintf(&b, "unknown event %q in state %q", string(e.Event), string(e.State))
	} else {
		fmt.Fprintf(&b, "event %q is not allowed in state %q", string(e.Event), string(e.State))
	}
	if len(e.Allowed) == 0 {
		b.WriteString(" (no events are allowed there)")
		return b.String()
	}
	b.WriteString(" (allowed: ")
	for i, ev := range e.Allowed {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(ev))
	}
	b.WriteString(")")
	return b.String()
}

// Is reports whether target is ErrInvalidTransition, or ErrUnknownEvent
// when the event is not registered.
func (e *TransitionError) Is(target error) bool {
	return target == ErrInvalidTransition || (e.UnknownEvent && target == ErrUnknownEvent)
}

// UnknownStateError is returned when a state name is not registered in the
// machine, for example a corrupt provision_state read from a database.
type UnknownStateError struct {
	// Machine is the name of the machine asked.
	Machine string
	// Field says which input held the state ("state", "target").
	Field string
	// State is the unregistered value.
	State State
}

// Error names the unknown state and where it came from.
func (e *UnknownStateError) Error() string {
	return fmt.Sprintf("statemachine: %s: %s %q is not a registered state", e.Machine, e.Field, string(e.State))
}

// Is reports whether target is ErrUnknownState.
func (e *UnknownStateError) Is(target error) bool { return target == ErrUnknownState }

// TargetError is returned when a target state is not acceptable: Ironic
// only ever aims a node at a registered, stable state.
type TargetError struct {
	// Machine is the name of the machine asked.
	Machine string
	// Field says which input held the target ("target", "explicit target").
	Field string
	// Target is the refused value.
	Target State
	// Reason explains what was expected.
	Reason string
}

// Error names the refused target and the expectation.
func (e *TargetError) Error() string {
	return fmt.Sprintf("statemachine: %s: %s %q: %s", e.Machine, e.Field, string(e.Target), e.Reason)
}

// Is reports whether target is ErrInvalidTarget.
func (e *TargetError) Is(target error) bool { return target == ErrInvalidTarget }

// DefinitionError is returned by New when a Definition is inconsistent. It
// names the offending field (for example "transitions[4].to"), its value,
// and what was expected.
type DefinitionError struct {
	// Field is the path of the offending field in the Definition.
	Field string
	// Value is the offending value.
	Value string
	// Reason explains what was expected.
	Reason string
}

// Error names the field, the value and the expectation.
func (e *DefinitionError) Error() string {
	return fmt.Sprintf("statemachine: definition: %s %q: %s", e.Field, e.Value, e.Reason)
}

// Is reports whether target is ErrInvalidDefinition.
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidDefinition }

// VerbError is returned by ParseVerb for a string that is not one of
// Ironic's provision verbs.
type VerbError struct {
	// Verb is the unrecognised input.
	Verb string
}

// Error names the input and lists the accepted verbs.
func (e *VerbError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "statemachine: unknown provision verb %q (accepted: ", e.Verb)
	for i, spec := range verbTable() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(spec.Verb))
	}
	b.WriteString(")")
	return b.String()
}

// Is reports whether target is ErrUnknownVerb.
func (e *VerbError) Is(target error) bool { return target == ErrUnknownVerb }

// InputError is returned by Verb.Validate when a verb lacks an input it
// requires. It never contains the value of a secret input.
type InputError struct {
	// Verb is the verb being validated.
	Verb Verb
	// Field is the request field that is missing, as named in Ironic's
	// API ("clean_steps", "service_steps", "rescue_password").
	Field string
	// Expected says what the field must hold.
	Expected string
}

// Error names the verb, the field and the expectation.
func (e *InputError) Error() string {
	return fmt.Sprintf("statemachine: verb %q: %s is required: %s", string(e.Verb), e.Field, e.Expected)
}

// Is reports whether target is ErrMissingInput.
func (e *InputError) Is(target error) bool { return target == ErrMissingInput }

// PowerStateError is returned by ParsePowerState and ParsePowerTarget for
// a string outside the accepted set.
type PowerStateError struct {
	// Value is the refused input.
	Value string
	// Accepted lists the values that would have been accepted.
	Accepted []PowerState
}

// Error names the input and the accepted values.
func (e *PowerStateError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "statemachine: unknown power state %q (accepted: ", e.Value)
	for i, p := range e.Accepted {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", string(p))
	}
	b.WriteString(")")
	return b.String()
}

// Is reports whether target is ErrUnknownPowerState.
func (e *PowerStateError) Is(target error) bool { return target == ErrUnknownPowerState }
