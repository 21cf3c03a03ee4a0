package driver

import (
	"fmt"
	"slices"
)

// Kind is one of the 13 interface kinds a driver is composed of, named as
// Ironic names them (the "interface type").
type Kind string

// The 13 interface kinds. Boot, deploy, management, network and power are
// the core kinds a hardware type must implement for real; the others may be
// served by a no-op implementation.
const (
	KindBIOS       Kind = "bios"
	KindBoot       Kind = "boot"
	KindConsole    Kind = "console"
	KindDeploy     Kind = "deploy"
	KindFirmware   Kind = "firmware"
	KindInspect    Kind = "inspect"
	KindManagement Kind = "management"
	KindNetwork    Kind = "network"
	KindPower      Kind = "power"
	KindRAID       Kind = "raid"
	KindRescue     Kind = "rescue"
	KindStorage    Kind = "storage"
	KindVendor     Kind = "vendor"
)

// Kinds returns the 13 interface kinds in Ironic's (alphabetical) order.
// The caller owns the returned slice.
func Kinds() []Kind {
	return []Kind{
		KindBIOS, KindBoot, KindConsole, KindDeploy, KindFirmware, KindInspect,
		KindManagement, KindNetwork, KindPower, KindRAID, KindRescue,
		KindStorage, KindVendor,
	}
}

// Valid reports whether k is one of the 13 interface kinds.
func (k Kind) Valid() bool { return slices.Contains(Kinds(), k) }

// Core reports whether k is a core kind (boot, deploy, management, network,
// power), one that must have a real implementation.
func (k Kind) Core() bool {
	switch k {
	case KindBoot, KindDeploy, KindManagement, KindNetwork, KindPower:
		return true
	}
	return false
}

// NodeField returns the name of the node field (and of the instance_info
// override key) that holds the implementation name for k, for example
// "power_interface".
func (k Kind) NodeField() string { return string(k) + "_interface" }

// ParseKind converts s to a Kind, failing with an error wrapping
// ErrInvalidParameter when s is not one of the 13 kinds.
func ParseKind(s string) (Kind, error) {
	k := Kind(s)
	if !k.Valid() {
		return "", fmt.Errorf("driver: %w: unknown interface kind %q (valid: %v)", ErrInvalidParameter, s, Kinds())
	}
	return k, nil
}
