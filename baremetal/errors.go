package baremetal

import (
	"errors"
	"fmt"
)

// Sentinel errors that callers branch on with errors.Is. The rich typed
// errors below match them.
var (
	// ErrNotFound: the node, port or conductor does not exist.
	ErrNotFound = errors.New("baremetal: not found")
	// ErrNodeLocked: another conductor holds the node's exclusive lock.
	ErrNodeLocked = errors.New("baremetal: node locked")
	// ErrNodeNotLocked: a release found the node unlocked.
	ErrNodeNotLocked = errors.New("baremetal: node not locked")
	// ErrConflict: a compare-and-swap write lost (the version moved on or
	// the writer no longer holds the reservation); nothing was written.
	ErrConflict = errors.New("baremetal: write conflict")
	// ErrInvalidInput: a field has a value the store refuses.
	ErrInvalidInput = errors.New("baremetal: invalid input")
	// ErrDuplicate: a unique field (UUID, name, MAC, instance UUID) is
	// already taken. Duplicate errors also match ErrInvalidInput.
	ErrDuplicate = errors.New("baremetal: duplicate")
	// ErrConductorAlreadyRegistered: an online conductor row with the
	// same hostname exists.
	ErrConductorAlreadyRegistered = errors.New("baremetal: conductor already registered")
	// ErrNodeInUse: the node cannot be deleted while it is reserved.
	ErrNodeInUse = errors.New("baremetal: node in use")
	// ErrPortgroupNotEmpty: the portgroup still has ports.
	ErrPortgroupNotEmpty = errors.New("baremetal: portgroup not empty")
)

// NotFoundError says which object could not be found. It matches
// ErrNotFound.
type NotFoundError struct {
	// Kind is "node", "port", "portgroup", "allocation",
	// "deploy_template", "runbook", "chassis", "volume_connector",
	// "volume_target", "conductor" or "history".
	Kind string
	// Ident is the identifier that was looked up (UUID, name, MAC, host).
	Ident string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("baremetal: %s %q not found", e.Kind, e.Ident)
}

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// NodeLockedError names the node and the conductor holding its lock, as
// Ironic's NodeLocked (HTTP 409) does. Callers treat it as retryable. It
// matches ErrNodeLocked.
type NodeLockedError struct {
	// Node is the node's UUID.
	Node string
	// Holder is the hostname of the conductor holding the lock.
	Holder string
}

func (e *NodeLockedError) Error() string {
	return fmt.Sprintf("baremetal: node %s is locked by host %s, please retry after the current operation is completed", e.Node, e.Holder)
}

// Is reports whether target is ErrNodeLocked.
func (e *NodeLockedError) Is(target error) bool { return target == ErrNodeLocked }

// NodeNotLockedError says a release found no lock on the node. It matches
// ErrNodeNotLocked.
type NodeNotLockedError struct {
	// Node is the node's UUID.
	Node string
	// Holder is the conductor that tried to release.
	Holder string
}

func (e *NodeNotLockedError) Error() string {
	return fmt.Sprintf("baremetal: node %s is not locked (release attempted by host %s)", e.Node, e.Holder)
}

// Is reports whether target is ErrNodeNotLocked.
func (e *NodeNotLockedError) Is(target error) bool { return target == ErrNodeNotLocked }

// ConflictError reports a lost compare-and-swap: the stored version is not
// the one the writer read, or the writer does not hold the reservation it
// claimed. Nothing was written. It matches ErrConflict.
type ConflictError struct {
	// Kind is "node" or "port".
	Kind string
	// Ident is the object's UUID.
	Ident string
	// Expected is the version the writer read.
	Expected int64
	// Actual is the stored version (0 when unknown).
	Actual int64
	// Holder is the reservation the writer claimed ("" for none).
	Holder string
	// ActualHolder is the stored reservation when the holder check failed.
	ActualHolder string
}

func (e *ConflictError) Error() string {
	if e.Holder != "" && e.Holder != e.ActualHolder {
		held := e.ActualHolder
		if held == "" {
			held = "nobody"
		}
		return fmt.Sprintf("baremetal: %s %s: write by %s refused: the reservation is held by %s", e.Kind, e.Ident, e.Holder, held)
	}
	return fmt.Sprintf("baremetal: %s %s: write refused: version is %d, writer read %d", e.Kind, e.Ident, e.Actual, e.Expected)
}

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// InvalidFieldError names an object's field whose value the store refuses
// and what would have been accepted. It never quotes the value, which may
// be a secret. It matches ErrInvalidInput.
type InvalidFieldError struct {
	// Kind is "node", "port", "conductor" or "history".
	Kind string
	// Ident identifies the object when known (UUID or name).
	Ident string
	// Field is the field's name as stored (for example "driver_info").
	Field string
	// Expected says what a valid value looks like.
	Expected string
	// Err is the underlying cause, if any (for example a JSON error).
	Err error
}

func (e *InvalidFieldError) Error() string {
	who := e.Kind
	if e.Ident != "" {
		who += " " + e.Ident
	}
	msg := fmt.Sprintf("baremetal: %s: invalid %s: expected %s", who, e.Field, e.Expected)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is reports whether target is ErrInvalidInput.
func (e *InvalidFieldError) Is(target error) bool { return target == ErrInvalidInput }

// Unwrap returns the underlying cause.
func (e *InvalidFieldError) Unwrap() error { return e.Err }

// DuplicateError says a unique field's value is taken. It matches both
// ErrDuplicate and ErrInvalidInput.
type DuplicateError struct {
	// Kind is "node" or "port".
	Kind string
	// Field is the unique field ("uuid", "name", "address", ...).
	Field string
	// Value is the value already in use (never a secret field).
	Value string
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("baremetal: %s with %s %q already exists", e.Kind, e.Field, e.Value)
}

// Is reports whether target is ErrDuplicate or ErrInvalidInput.
func (e *DuplicateError) Is(target error) bool {
	return target == ErrDuplicate || target == ErrInvalidInput
}

// ConductorAlreadyRegisteredError names a conductor whose online row
// already exists. It matches ErrConductorAlreadyRegistered.
type ConductorAlreadyRegisteredError struct {
	// Hostname is the conductor's hostname.
	Hostname string
}

func (e *ConductorAlreadyRegisteredError) Error() string {
	return fmt.Sprintf("baremetal: conductor %s is already registered and online", e.Hostname)
}

// Is reports whether target is ErrConductorAlreadyRegistered.
func (e *ConductorAlreadyRegisteredError) Is(target error) bool {
	return target == ErrConductorAlreadyRegistered
}

// NodeInUseError says a node cannot be deleted because a conductor holds
// it. It matches ErrNodeInUse and ErrNodeLocked.
type NodeInUseError struct {
	// Node is the node's UUID.
	Node string
	// Holder is the conductor holding the node.
	Holder string
}

func (e *NodeInUseError) Error() string {
	return fmt.Sprintf("baremetal: node %s cannot be deleted: it is locked by host %s", e.Node, e.Holder)
}

// Is reports whether target is ErrNodeInUse or ErrNodeLocked.
func (e *NodeInUseError) Is(target error) bool {
	return target == ErrNodeInUse || target == ErrNodeLocked
}

// PortgroupNotEmptyError says a portgroup cannot be deleted (or moved to
// another node) because ports are still members of it, as Ironic's
// PortgroupNotEmpty. It matches ErrPortgroupNotEmpty.
type PortgroupNotEmptyError struct {
	// Portgroup is the portgroup's UUID.
	Portgroup string
}

func (e *PortgroupNotEmptyError) Error() string {
	return fmt.Sprintf("baremetal: cannot complete the requested action because portgroup %s contains ports", e.Portgroup)
}

// Is reports whether target is ErrPortgroupNotEmpty.
func (e *PortgroupNotEmptyError) Is(target error) bool { return target == ErrPortgroupNotEmpty }
