package netboot

import (
	"errors"
	"fmt"
)

// ErrNoConfig is returned by the read accessors for a node or MAC without
// a boot configuration.
var ErrNoConfig = errors.New("netboot: no boot configuration")

// MACInUseError is PutConfig's refusal of a MAC that another node's
// configuration holds: two nodes must never answer for one machine.
type MACInUseError struct {
	MAC   string
	Node  string // the node whose configuration was refused
	Owner string // the node holding the MAC
}

func (e *MACInUseError) Error() string {
	return fmt.Sprintf("netboot: node %s: MAC %s belongs to node %s's boot configuration", e.Node, e.MAC, e.Owner)
}

// InvalidConfigError is PutConfig's refusal of a configuration the server
// cannot serve safely: it names the node, the field and what was
// expected. It never quotes a whole parameter (parameters come from
// driver_info, which an operator may have filled carelessly).
type InvalidConfigError struct {
	Node   string
	Field  string // e.g. "macs[1]", "params[3]", "kernel"
	Reason string
}

func (e *InvalidConfigError) Error() string {
	node := e.Node
	if node == "" {
		node = "(none)"
	}
	return fmt.Sprintf("netboot: node %s: %s: %s", node, e.Field, e.Reason)
}

// MissingFileError is a boot loader binary the server needs and cannot
// find: it names the path and the Debian package that provides it. New
// returns one for the iPXE binaries; PutConfig returns one for the
// pxelinux and GRUB files when a node's configuration needs them.
type MissingFileError struct {
	File    string // the name the server serves it under, e.g. "undionly.kpxe"
	Path    string
	Package string // the Debian package(s) that install it
	Option  string // the Options field that sets the path
	Err     error
}

func (e *MissingFileError) Error() string {
	return fmt.Sprintf("netboot: %s not found at %s (install the Debian package %s, or set Options.%s): %v",
		e.File, e.Path, e.Package, e.Option, e.Err)
}

func (e *MissingFileError) Unwrap() error { return e.Err }

// OptionsError is New's refusal of an Options value.
type OptionsError struct {
	Field  string
	Reason string
}

func (e *OptionsError) Error() string {
	return fmt.Sprintf("netboot: Options.%s: %s", e.Field, e.Reason)
}
