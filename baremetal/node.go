package baremetal

import (
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/jsonmap"
	"github.com/anvilmetal/anvil/statemachine"
)

// Node is one bare-metal machine as the store keeps it: the fields of
// Ironic's node table that a provisioning engine needs (reference §10.1),
// plus Version, the compare-and-swap counter that fences every write.
//
// The JSON-typed fields (DriverInfo, InstanceInfo, DriverInternalInfo and
// the others) are plain map[string]any values so that drivers and plugins
// can read and write them without a schema. DriverInfo, InstanceInfo and
// DriverInternalInfo hold secrets (BMC passwords, the agent token): a Node
// formatted with fmt, logged with log/slog or encoded with encoding/json
// shows them masked (see Masked). Use the fields directly when the secret
// itself is needed, for example to talk to a BMC.
//
// Empty strings stand for SQL NULL in the nullable columns (name,
// instance_uuid, reservation, target states and so on), and a zero
// time.Time stands for a NULL timestamp.
type Node struct {
	// ID is the store's internal key. It is assigned by the store, never
	// shown to API users, and used as the stable pagination order.
	ID int64
	// UUID is the node's public identity. The store generates one when a
	// node is created without it.
	UUID string
	// Name is an optional unique, human-friendly name. It must not look
	// like a UUID, so that GetNode can accept either.
	Name string
	// InstanceUUID names the workload deployed on the node; a node with
	// one is "associated".
	InstanceUUID string
	// AllocationUUID is the allocation the node is bound to (Ironic's
	// allocation_id, shown as allocation_uuid), written by the
	// conductor's allocation processing; empty for none.
	AllocationUUID string
	// ChassisUUID is the chassis the node belongs to (Ironic's
	// chassis_id, shown as chassis_uuid); empty for none. The store
	// refuses a chassis that does not exist.
	ChassisUUID string
	// InstanceName is a free-form name of the workload.
	InstanceName string
	// Driver is the hardware type name the node is driven by.
	Driver string

	// The 13 interface fields name the implementation of each interface
	// kind the node uses; the engine fills defaults at enrollment.
	BIOSInterface       string
	BootInterface       string
	ConsoleInterface    string
	DeployInterface     string
	FirmwareInterface   string
	InspectInterface    string
	ManagementInterface string
	NetworkInterface    string
	PowerInterface      string
	RAIDInterface       string
	RescueInterface     string
	StorageInterface    string
	VendorInterface     string

	// DriverInfo holds what the driver needs to reach the machine (BMC
	// address and credentials). Sensitive.
	DriverInfo map[string]any
	// DriverInternalInfo is the conductor's scratch space (step lists,
	// agent URL, agent token). Sensitive.
	DriverInternalInfo map[string]any
	// InstanceInfo holds per-deployment data (image, root size, config
	// drive). Sensitive.
	InstanceInfo map[string]any
	// Properties describes the hardware (cpu_arch, memory_mb, local_gb,
	// capabilities, root_device).
	Properties map[string]any
	// Extra is free-form operator data.
	Extra map[string]any
	// CleanStep, DeployStep and ServiceStep hold the step being run.
	CleanStep   map[string]any
	DeployStep  map[string]any
	ServiceStep map[string]any
	// RAIDConfig is the current RAID configuration and TargetRAIDConfig
	// the requested one.
	RAIDConfig       map[string]any
	TargetRAIDConfig map[string]any
	// NetworkData is static network configuration for the ramdisk.
	NetworkData map[string]any

	// PowerState and TargetPowerState use Ironic's power state strings
	// ("power on", "power off", ...); empty means null (unknown / none).
	// They are statemachine.PowerState, the type drivers report
	// (driver.PowerState is an alias of it), so no conversion is needed.
	PowerState       statemachine.PowerState
	TargetPowerState statemachine.PowerState
	// ProvisionState and TargetProvisionState use Ironic's provision state
	// strings (reference §1.1), typed as the state machine's states. A node
	// created without a provision state starts in "enroll".
	ProvisionState       statemachine.State
	TargetProvisionState statemachine.State
	// ProvisionUpdatedAt is stamped by the store on every write that
	// changes ProvisionState or TargetProvisionState, and by
	// TouchProvisioning; callback timeouts compare against it.
	ProvisionUpdatedAt time.Time

	// Maintenance takes the node out of automatic handling.
	Maintenance       bool
	MaintenanceReason string
	// Fault says why the engine put the node in maintenance ("power
	// failure", "clean failure", ...).
	Fault string
	// ConsoleEnabled reports whether the serial console is on.
	ConsoleEnabled bool
	// LastError is the last failure, for operators.
	LastError string

	// Reservation is the hostname of the conductor holding the node's
	// exclusive lock, or empty. It is written only by Reserve, Release
	// and the bulk release operations, never by UpdateNode.
	Reservation string
	// ConductorGroup restricts the node to conductors of that group.
	ConductorGroup string
	// ConductorAffinity is the ID of the conductor that last prepared
	// local state (boot files) for the node; zero for none.
	ConductorAffinity int64

	// Traits are the node's scheduling traits.
	Traits []string
	// ResourceClass is the scheduling resource class.
	ResourceClass string
	// Owner and Lessee are project identifiers used for access control.
	Owner  string
	Lessee string
	// Description is free text.
	Description string
	// Protected nodes refuse rebuild and undeploy.
	Protected       bool
	ProtectedReason string
	// Retired nodes go to manageable after cleaning and cannot be
	// provided.
	Retired       bool
	RetiredReason string
	// AutomatedClean overrides the conductor's automated cleaning setting;
	// nil means "use the configuration".
	AutomatedClean *bool

	// InspectionStartedAt and InspectionFinishedAt bracket the last
	// inspection.
	InspectionStartedAt  time.Time
	InspectionFinishedAt time.Time

	// BootMode ("uefi", "bios") and SecureBoot are cached from the BMC;
	// SecureBoot is nil when unknown.
	BootMode   string
	SecureBoot *bool

	// Shard groups nodes for external consumers.
	Shard string
	// ParentNode is the UUID of this node's parent, if any.
	ParentNode string
	// DisablePowerOff makes the node refuse power-off.
	DisablePowerOff bool
	// Health is the health string reported by the BMC.
	Health string

	// CreatedAt and UpdatedAt are stamped by the store.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version is incremented by the store on every successful write of
	// the node's fields. UpdateNode succeeds only when the caller's
	// Version equals the stored one (compare-and-swap).
	Version int64
}

// Clone returns a deep copy of n: maps, slices and pointers are copied so
// that changing the copy never changes n.
func (n *Node) Clone() *Node {
	if n == nil {
		return nil
	}
	c := *n
	c.DriverInfo = jsonmap.Clone(n.DriverInfo)
	c.DriverInternalInfo = jsonmap.Clone(n.DriverInternalInfo)
	c.InstanceInfo = jsonmap.Clone(n.InstanceInfo)
	c.Properties = jsonmap.Clone(n.Properties)
	c.Extra = jsonmap.Clone(n.Extra)
	c.CleanStep = jsonmap.Clone(n.CleanStep)
	c.DeployStep = jsonmap.Clone(n.DeployStep)
	c.ServiceStep = jsonmap.Clone(n.ServiceStep)
	c.RAIDConfig = jsonmap.Clone(n.RAIDConfig)
	c.TargetRAIDConfig = jsonmap.Clone(n.TargetRAIDConfig)
	c.NetworkData = jsonmap.Clone(n.NetworkData)
	if n.Traits != nil {
		c.Traits = append([]string(nil), n.Traits...)
	}
	if n.AutomatedClean != nil {
		v := *n.AutomatedClean
		c.AutomatedClean = &v
	}
	if n.SecureBoot != nil {
		v := *n.SecureBoot
		c.SecureBoot = &v
	}
	return &c
}

// SetInterfaces sets the node's interface fields from a kind → name map
// (as driver.Registry.FillDefaults returns); a kind missing from m
// clears its field.
func (n *Node) SetInterfaces(m map[driver.Kind]string) {
	n.BIOSInterface = m[driver.KindBIOS]
	n.BootInterface = m[driver.KindBoot]
	n.ConsoleInterface = m[driver.KindConsole]
	n.DeployInterface = m[driver.KindDeploy]
	n.FirmwareInterface = m[driver.KindFirmware]
	n.InspectInterface = m[driver.KindInspect]
	n.ManagementInterface = m[driver.KindManagement]
	n.NetworkInterface = m[driver.KindNetwork]
	n.PowerInterface = m[driver.KindPower]
	n.RAIDInterface = m[driver.KindRAID]
	n.RescueInterface = m[driver.KindRescue]
	n.StorageInterface = m[driver.KindStorage]
	n.VendorInterface = m[driver.KindVendor]
}

// Associated reports whether a workload (instance) is bound to the node.
func (n *Node) Associated() bool { return n.InstanceUUID != "" }

// Reserved reports whether some conductor holds the node's exclusive lock.
func (n *Node) Reserved() bool { return n.Reservation != "" }
