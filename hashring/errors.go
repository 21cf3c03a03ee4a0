package hashring

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrEmptyRing is returned by lookups on a ring that has no members.
	// The conductor treats it as Ironic treats TemporaryFailure: nobody
	// can own the key right now.
	ErrEmptyRing = errors.New("hashring: ring has no members")
	// ErrNoOwner is returned by GetN when every member of a non-empty
	// ring is in the ignore list.
	ErrNoOwner = errors.New("hashring: every member is ignored")
	// ErrInvalidMember is wrapped by every *MemberError.
	ErrInvalidMember = errors.New("hashring: invalid member")
	// ErrInvalidConfig is wrapped by every *ConfigError.
	ErrInvalidConfig = errors.New("hashring: invalid config")
	// ErrNoRing is wrapped by *NoRingError: no conductor serves the
	// requested conductor group and hardware type (Ironic's
	// DriverNotFound / NoValidHost).
	ErrNoRing = errors.New("hashring: no ring")
)

// MemberError reports a member (or conductor record) that cannot be put on
// a ring. It names the offending entry by position and name, the field at
// fault, and what was expected.
type MemberError struct {
	// Index is the position of the entry in the slice given to the
	// constructor.
	Index int
	// Name is the member's (or conductor's) name as given.
	Name string
	// Field is the offending field: "name", "weight" or "hardware_types".
	Field string
	// Reason says what was expected.
	Reason string
}

// Error implements error.
func (e *MemberError) Error() string {
	return fmt.Sprintf("hashring: member %d (%q): %s: %s", e.Index, e.Name, e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidMember) true.
func (e *MemberError) Unwrap() error { return ErrInvalidMember }

// ConfigError reports a Config field that is out of range.
type ConfigError struct {
	// Field is the Config field at fault.
	Field string
	// Value is the rejected value, formatted.
	Value string
	// Reason says what was expected.
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("hashring: config %s=%s: %s", e.Field, e.Value, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// NoRingError reports that no ring exists for a conductor group and
// hardware type: no live conductor in that group enables that hardware
// type.
type NoRingError struct {
	// Group is the conductor group asked for (lower-cased).
	Group string
	// HardwareType is the hardware type asked for.
	HardwareType string
}

// Error implements error.
func (e *NoRingError) Error() string {
	return fmt.Sprintf("hashring: no conductor in group %q serves hardware type %q", e.Group, e.HardwareType)
}

// Unwrap makes errors.Is(err, ErrNoRing) true.
func (e *NoRingError) Unwrap() error { return ErrNoRing }
