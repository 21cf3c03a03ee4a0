package driver

import (
	"fmt"
	"slices"
)

// HardwareType is a hardware type as data: a name and, per interface kind,
// the ordered list of implementation names it supports. The first enabled
// one is the default for new nodes.
type HardwareType struct {
	Name string `json:"name"`
	// Supported lists implementation names per kind, in preference order.
	// Kinds left out get Ironic's defaults (no-bios, no-console, no-inspect,
	// noop network, no-raid, no-rescue, noop storage, no-vendor,
	// no-firmware); boot, deploy, management and power are required.
	Supported map[Kind][]string `json:"supported"`
	// SkipCompatibilityCheck lets a node attach any enabled implementation
	// of any kind, as Ironic does for fake-hardware. Supported is then only
	// used to compute defaults.
	SkipCompatibilityCheck bool `json:"skip_compatibility_check,omitempty"`
}

// defaultSupported are the supported lists a hardware type inherits for
// kinds it does not list (Ironic's AbstractHardwareType).
func defaultSupported(k Kind) []string {
	switch k {
	case KindBIOS:
		return []string{NoBIOS}
	case KindConsole:
		return []string{NoConsole}
	case KindInspect:
		return []string{NoInspect}
	case KindNetwork:
		return []string{Noop}
	case KindRAID:
		return []string{NoRAID}
	case KindRescue:
		return []string{NoRescue}
	case KindStorage:
		return []string{Noop}
	case KindVendor:
		return []string{NoVendor}
	case KindFirmware:
		return []string{NoFirmware}
	}
	return nil
}

// SupportedFor returns the ordered implementation names h supports for k,
// applying the defaults for kinds h leaves out. The caller owns the slice.
func (h HardwareType) SupportedFor(k Kind) []string {
	if s, ok := h.Supported[k]; ok && len(s) > 0 {
		return slices.Clone(s)
	}
	return defaultSupported(k)
}

// Supports reports whether h lists name for k.
func (h HardwareType) Supports(k Kind, name string) bool {
	return slices.Contains(h.SupportedFor(k), name)
}

// Check reports what is wrong with h: an empty name, an unknown kind, an
// empty implementation name, or a missing required kind.
func (h HardwareType) Check() error {
	if h.Name == "" {
		return fmt.Errorf("driver: %w: hardware type with an empty name", ErrInvalidParameter)
	}
	for k, names := range h.Supported {
		if !k.Valid() {
			return fmt.Errorf("driver: %w: hardware type %q lists unknown interface kind %q", ErrInvalidParameter, h.Name, k)
		}
		for _, n := range names {
			if n == "" {
				return fmt.Errorf("driver: %w: hardware type %q lists an empty %s implementation name", ErrInvalidParameter, h.Name, k)
			}
		}
	}
	for _, k := range []Kind{KindBoot, KindDeploy, KindManagement, KindPower} {
		if len(h.Supported[k]) == 0 {
			return fmt.Errorf("driver: %w: hardware type %q must list supported %s interfaces", ErrInvalidParameter, h.Name, k)
		}
	}
	return nil
}

func (h HardwareType) clone() HardwareType {
	c := HardwareType{Name: h.Name, SkipCompatibilityCheck: h.SkipCompatibilityCheck, Supported: make(map[Kind][]string, len(h.Supported))}
	for k, v := range h.Supported {
		c.Supported[k] = slices.Clone(v)
	}
	return c
}

// Implementation is one named implementation of one kind.
type Implementation struct {
	Kind Kind
	Name string
	Impl Interface
}

// Bundle is a set of hardware types and implementations registered
// together: the built-ins, or what one plugin provides.
type Bundle struct {
	HardwareTypes   []HardwareType
	Implementations []Implementation
}
