package baremetal

import "time"

// ConductorRecord is one row of the conductors table (reference §4.1): a
// conductor process as the other conductors see it. A conductor is alive
// when Online is true and UpdatedAt is within the heartbeat timeout.
type ConductorRecord struct {
	// ID is the store's key; nodes name it in ConductorAffinity.
	ID int64
	// Hostname identifies the conductor; it is the string written into a
	// node's Reservation when this conductor locks it.
	Hostname string
	// ConductorGroup is the group the conductor serves ("" by default).
	ConductorGroup string
	// Drivers lists the hardware types the conductor loaded.
	Drivers []string
	// Online is false once the conductor unregistered or started to drain.
	Online bool
	// CreatedAt is the first registration; UpdatedAt the last keepalive.
	CreatedAt time.Time
	UpdatedAt time.Time
}

// HardwareInterface is one row of conductor_hardware_interfaces: an
// interface implementation a conductor can run for a hardware type.
type HardwareInterface struct {
	// HardwareType is the hardware type (driver) name.
	HardwareType string
	// InterfaceType is the interface kind ("power", "boot", ...).
	InterfaceType string
	// InterfaceName is the implementation name ("ipmitool", "redfish").
	InterfaceName string
	// Default marks the implementation used when a node names none.
	Default bool
}

// ConductorRegistration is what a conductor writes when it starts.
type ConductorRegistration struct {
	// Hostname is required and at most 255 characters.
	Hostname string
	// ConductorGroup is the group served; "" is the default group.
	ConductorGroup string
	// Drivers lists the hardware types loaded.
	Drivers []string
	// Interfaces replaces the conductor's hardware-interface rows.
	Interfaces []HardwareInterface
	// UpdateExisting makes registration succeed over a row that is still
	// online (a restart faster than the heartbeat timeout), as Ironic does
	// after catching ConductorAlreadyRegistered. Without it such a row
	// gives a *ConductorAlreadyRegisteredError.
	UpdateExisting bool
}
