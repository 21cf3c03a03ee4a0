package driver

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels for what a BMC answered (or did not), matched by the typed
// errors below through their Is methods. They cross the plugin boundary
// as typed errors, so a conductor branches on them the same way for a
// built-in driver and a plugin.
var (
	// ErrBMCAuthentication means the BMC refused the credentials (a wrong
	// user name or password), as opposed to a protocol or cipher mismatch.
	ErrBMCAuthentication = errors.New("BMC refused the credentials")
	// ErrBMCUnreachable means nothing answered at the BMC's address within
	// the bounded wait.
	ErrBMCUnreachable = errors.New("BMC unreachable")
	// ErrIdentityMismatch means the BMC at a node's address now reports a
	// different machine than the one recorded for the node.
	ErrIdentityMismatch = errors.New("BMC reports a different machine")
)

// BMCAuthError says a BMC refused the credentials of a node. It never
// carries the password.
type BMCAuthError struct {
	Node     string // node UUID
	Kind     Kind
	Impl     string
	Address  string // the BMC address (host, host:port or URL) as configured
	Username string
	Detail   string // what the BMC or the tool said, masked
}

func (e *BMCAuthError) Error() string {
	msg := fmt.Sprintf("%s/%s: node %s: the BMC at %s refused the credentials of user %q", e.Kind, e.Impl, e.Node, e.Address, e.Username)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Is matches ErrBMCAuthentication.
func (e *BMCAuthError) Is(target error) bool { return target == ErrBMCAuthentication }

// BMCUnreachableError says nothing answered at a node's BMC address within
// Waited (after Attempts tries).
type BMCUnreachableError struct {
	Node     string
	Kind     Kind
	Impl     string
	Address  string // host:port, or the URL
	Attempts int
	Waited   string // the bounded wait, as a duration string ("60s")
	Detail   string
}

func (e *BMCUnreachableError) Error() string {
	msg := fmt.Sprintf("%s/%s: node %s: no answer from the BMC at %s", e.Kind, e.Impl, e.Node, e.Address)
	if e.Attempts > 0 || e.Waited != "" {
		msg += fmt.Sprintf(" after %d attempt(s) in %s", e.Attempts, e.Waited)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Is matches ErrBMCUnreachable.
func (e *BMCUnreachableError) Is(target error) bool { return target == ErrBMCUnreachable }

// IdentityKey is the driver_internal_info key under which a driver records
// the identity of the machine its BMC reported when the node was first
// reached (at manage), as "<scheme>:<value>" ("redfish-uuid:…",
// "ipmi-guid:…"). Drivers compare later answers with it through
// CheckIdentity; the conductor deletes it when the node's driver_info or
// hardware type changes (a deliberate re-cabling) and before an inspection,
// which records it afresh.
const IdentityKey = "bmc_machine_identity"

// IdentityMismatchError says the BMC at a node's address reports another
// machine than the one recorded for the node, so an action was refused
// rather than sent to the wrong machine.
type IdentityMismatchError struct {
	Node     string
	Kind     Kind
	Impl     string
	Address  string
	Recorded string // the identity recorded for the node
	Reported string // the identity the BMC reports now
}

func (e *IdentityMismatchError) Error() string {
	return fmt.Sprintf("%s/%s: node %s: the BMC at %s reports machine %s, but the node was recorded as machine %s; "+
		"refusing to act on another machine (if the change is deliberate, update the node's driver_info or inspect it to record the new identity)",
		e.Kind, e.Impl, e.Node, e.Address, e.Reported, e.Recorded)
}

// Is matches ErrIdentityMismatch.
func (e *IdentityMismatchError) Is(target error) bool { return target == ErrIdentityMismatch }

// CheckIdentity compares the machine identity a BMC reports now
// ("<scheme>:<value>") with the one recorded in t's driver_internal_info.
// With none recorded (or one of another scheme, after a hardware type
// change) it records reported and returns nil; an empty reported identity
// (the BMC does not report one) is accepted without recording. A
// different identity of the same scheme is an *IdentityMismatchError;
// values compare case-insensitively (UUIDs are printed in either case).
func CheckIdentity(t *Task, kind Kind, impl, address, reported string) error {
	if reported == "" {
		return nil
	}
	recorded, _ := t.DriverInternalInfo[IdentityKey].(string)
	if recorded == "" || identityScheme(recorded) != identityScheme(reported) {
		t.SetDriverInternalInfo(IdentityKey, reported)
		return nil
	}
	if strings.EqualFold(recorded, reported) {
		return nil
	}
	return &IdentityMismatchError{Node: t.NodeUUID, Kind: kind, Impl: impl, Address: address, Recorded: recorded, Reported: reported}
}

func identityScheme(id string) string {
	scheme, _, _ := strings.Cut(id, ":")
	return scheme
}
