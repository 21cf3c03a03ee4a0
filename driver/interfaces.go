package driver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// Property describes one driver_info property an implementation reads, as
// Ironic's get_properties does.
type Property struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
}

// Interface is what every implementation of every kind provides.
//
// Properties returns the driver_info properties the implementation reads;
// it is static metadata and the caller owns the returned slice.
//
// Validate checks that the node has what the implementation needs (for
// example the required driver_info) without talking to hardware unless it
// must. It returns nil, a *MissingParameterError, an *InvalidParameterError
// or an *UnsupportedError (the no-op implementations). It changes nothing.
type Interface interface {
	Properties() []Property
	Validate(ctx context.Context, t *Task) error
}

// PowerState is a node power state, with Ironic's string values. It is
// statemachine.PowerState itself (an alias), so that a state read from a
// driver is stored on a baremetal.Node without a conversion; the aliased
// constants keep the names vendors implement against. The target values
// Reboot, SoftReboot and SoftPowerOff are accepted by SetPowerState.
type PowerState = statemachine.PowerState

// Power states and power targets.
const (
	PowerOn      = statemachine.PowerOn
	PowerOff     = statemachine.PowerOff
	Reboot       = statemachine.PowerReboot
	SoftReboot   = statemachine.PowerSoftReboot
	SoftPowerOff = statemachine.PowerSoftOff
	PowerError   = statemachine.PowerError
	PowerUnknown = statemachine.PowerNone // Ironic's null
)

// PowerInterface controls a node's power.
//
// GetPowerState reads the current state; it is idempotent and may be
// called at any time (the power-sync periodic task calls it often).
// SetPowerState drives the node to target (PowerOn, PowerOff, SoftPowerOff,
// Reboot or SoftReboot) and returns once it is reached or timeout (zero
// means the implementation's default) expires. Reboot power-cycles the node
// and leaves it on. After an error the caller re-reads the power state.
type PowerInterface interface {
	Interface
	GetPowerState(ctx context.Context, t *Task) (PowerState, error)
	SetPowerState(ctx context.Context, t *Task, target PowerState, timeout time.Duration) error
	Reboot(ctx context.Context, t *Task, timeout time.Duration) error
}

// BootDevice is a boot device, with Ironic's string values.
type BootDevice string

// Boot devices.
const (
	BootPXE      BootDevice = "pxe"
	BootDisk     BootDevice = "disk"
	BootCDROM    BootDevice = "cdrom"
	BootBIOS     BootDevice = "bios"
	BootSafe     BootDevice = "safe"
	BootWANBoot  BootDevice = "wanboot"
	BootUEFIHTTP BootDevice = "uefi-http"
)

// BootDeviceState is the current boot device; Persistent is nil when the
// hardware cannot tell.
type BootDeviceState struct {
	Device     BootDevice `json:"boot_device,omitempty"`
	Persistent *bool      `json:"persistent,omitempty"`
}

// ManagementInterface manages a node's BMC beyond power: the boot device.
// All methods are idempotent.
type ManagementInterface interface {
	Interface
	SupportedBootDevices(ctx context.Context, t *Task) ([]BootDevice, error)
	SetBootDevice(ctx context.Context, t *Task, device BootDevice, persistent bool) error
	GetBootDevice(ctx context.Context, t *Task) (BootDeviceState, error)
}

// BootMode is a firmware boot mode.
type BootMode string

// Boot modes.
const (
	BootModeBIOS BootMode = "bios"
	BootModeUEFI BootMode = "uefi"
)

// BootModeManager is an optional capability of a management interface that
// can read and set the boot mode.
type BootModeManager interface {
	GetBootMode(ctx context.Context, t *Task) (BootMode, error)
	SetBootMode(ctx context.Context, t *Task, mode BootMode) error
}

// BootInterface prepares how a node boots: a ramdisk (deploy, clean,
// rescue, inspect) or the installed instance. Prepare methods are
// idempotent; CleanUp methods tolerate nothing to clean.
type BootInterface interface {
	Interface
	PrepareRamdisk(ctx context.Context, t *Task, params map[string]any) error
	CleanUpRamdisk(ctx context.Context, t *Task) error
	PrepareInstance(ctx context.Context, t *Task) error
	CleanUpInstance(ctx context.Context, t *Task) error
}

// DeployInterface deploys an instance onto a node.
//
// Prepare readies the environment before deploy steps run. Deploy is the
// core deploy step; it returns StepResult{Wait: true} when it continues
// asynchronously (Ironic's "wait call-back"). TearDown removes the
// instance (the node ends powered off); CleanUp releases what Prepare
// created; TakeOver re-establishes the environment when a conductor takes
// over the node.
type DeployInterface interface {
	Interface
	Prepare(ctx context.Context, t *Task) error
	Deploy(ctx context.Context, t *Task) (StepResult, error)
	TearDown(ctx context.Context, t *Task) error
	CleanUp(ctx context.Context, t *Task) error
	TakeOver(ctx context.Context, t *Task) error
}

// StepPreparer is an optional capability of a deploy interface that
// prepares and tears down the environment for running clean or service
// steps (Ironic's prepare_cleaning / tear_down_cleaning and their service
// counterparts). PrepareSteps returns StepResult{Wait: true} when the
// conductor must wait for a ramdisk to come up.
type StepPreparer interface {
	PrepareSteps(ctx context.Context, t *Task, kind steps.Kind) (StepResult, error)
	TearDownSteps(ctx context.Context, t *Task, kind steps.Kind) error
}

// InspectInterface discovers hardware properties. InspectHardware records
// what it found with t.SetProperty and t.AddPort; it returns
// StepResult{Wait: true} when inspection continues asynchronously
// (Ironic's "inspect wait").
type InspectInterface interface {
	Interface
	InspectHardware(ctx context.Context, t *Task) (StepResult, error)
}

// BIOSSetting is one BIOS setting with optional registry metadata.
type BIOSSetting struct {
	Name            string   `json:"name"`
	Value           string   `json:"value"`
	AttributeType   string   `json:"attribute_type,omitempty"`
	AllowableValues []string `json:"allowable_values,omitempty"`
	LowerBound      *int64   `json:"lower_bound,omitempty"`
	UpperBound      *int64   `json:"upper_bound,omitempty"`
	ReadOnly        bool     `json:"read_only,omitempty"`
	ResetRequired   bool     `json:"reset_required,omitempty"`
}

// BIOSInterface reads BIOS settings. Changing them (apply_configuration,
// factory_reset) is done through steps.
type BIOSInterface interface {
	Interface
	// CacheBIOSSettings returns the current settings; the caller stores them.
	CacheBIOSSettings(ctx context.Context, t *Task) ([]BIOSSetting, error)
}

// RAIDInterface validates RAID configurations. Building and deleting them
// (create_configuration, delete_configuration) is done through steps.
type RAIDInterface interface {
	Interface
	ValidateRAIDConfig(ctx context.Context, t *Task, config map[string]any) error
}

// ConsoleInfo says how to reach a node's console.
type ConsoleInfo struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// ConsoleInterface starts and stops a node's serial or graphical console.
type ConsoleInterface interface {
	Interface
	StartConsole(ctx context.Context, t *Task) error
	StopConsole(ctx context.Context, t *Task) error
	GetConsole(ctx context.Context, t *Task) (ConsoleInfo, error)
}

// VendorMethod describes a vendor passthru method.
type VendorMethod struct {
	Name           string                   `json:"name"`
	Description    string                   `json:"description,omitempty"`
	HTTPMethods    []string                 `json:"http_methods"`
	Async          bool                     `json:"async"`
	AttachResponse bool                     `json:"attach,omitempty"`
	ArgsInfo       map[string]steps.ArgInfo `json:"argsinfo,omitempty"`
}

// VendorInterface exposes vendor passthru methods. Call runs method with
// the HTTP verb httpMethod and args; the returned value must be
// JSON-serialisable (through a plugin it arrives as decoded JSON).
// An unknown method yields an *UnsupportedError.
type VendorInterface interface {
	Interface
	Methods() []VendorMethod
	Call(ctx context.Context, t *Task, method, httpMethod string, args map[string]any) (any, error)
}

// RescueInterface boots a node into a rescue ramdisk and back. Rescue
// returns StepResult{Wait: true} when the conductor must wait for the
// rescue ramdisk to call back (Ironic's "rescue wait").
type RescueInterface interface {
	Interface
	Rescue(ctx context.Context, t *Task) (StepResult, error)
	Unrescue(ctx context.Context, t *Task) error
	CleanUp(ctx context.Context, t *Task) error
}

// FirmwareComponent is one firmware component and its versions.
type FirmwareComponent struct {
	Component          string `json:"component"`
	InitialVersion     string `json:"initial_version"`
	CurrentVersion     string `json:"current_version"`
	LastVersionFlashed string `json:"last_version_flashed,omitempty"`
	// Vendor, Model and SerialNumber identify the hardware the firmware
	// runs on (Ironic's API 1.114), when the BMC reports them: for a NIC
	// its adapter's manufacturer, model and serial number; for the BMC
	// its model alone; none for the BIOS.
	Vendor       string `json:"vendor,omitempty"`
	Model        string `json:"model,omitempty"`
	SerialNumber string `json:"serial_number,omitempty"`
}

// FirmwareInterface reads firmware versions. Updating them is done through
// steps.
type FirmwareInterface interface {
	Interface
	CacheFirmwareComponents(ctx context.Context, t *Task) ([]FirmwareComponent, error)
}

// NetworkPurpose names the network a node is attached to for an operation.
type NetworkPurpose string

// Network purposes.
const (
	NetworkProvisioning NetworkPurpose = "provisioning"
	NetworkCleaning     NetworkPurpose = "cleaning"
	NetworkRescuing     NetworkPurpose = "rescuing"
	NetworkInspection   NetworkPurpose = "inspection"
	NetworkServicing    NetworkPurpose = "servicing"
	NetworkTenant       NetworkPurpose = "tenant"
)

// NetworkInterface wires a node's ports to the network an operation needs.
// Both methods are idempotent.
type NetworkInterface interface {
	Interface
	AddNetwork(ctx context.Context, t *Task, purpose NetworkPurpose) error
	RemoveNetwork(ctx context.Context, t *Task, purpose NetworkPurpose) error
}

// StorageInterface attaches remote volumes. ShouldWriteImage reports
// whether the deploy must write an image to a local disk (false when the
// node boots from a volume).
type StorageInterface interface {
	Interface
	AttachVolumes(ctx context.Context, t *Task) error
	DetachVolumes(ctx context.Context, t *Task) error
	ShouldWriteImage(ctx context.Context, t *Task) (bool, error)
}

// kindMatches reports whether impl implements the Go interface of kind.
func kindMatches(kind Kind, impl Interface) bool {
	var ok bool
	switch kind {
	case KindBIOS:
		_, ok = impl.(BIOSInterface)
	case KindBoot:
		_, ok = impl.(BootInterface)
	case KindConsole:
		_, ok = impl.(ConsoleInterface)
	case KindDeploy:
		_, ok = impl.(DeployInterface)
	case KindFirmware:
		_, ok = impl.(FirmwareInterface)
	case KindInspect:
		_, ok = impl.(InspectInterface)
	case KindManagement:
		_, ok = impl.(ManagementInterface)
	case KindNetwork:
		_, ok = impl.(NetworkInterface)
	case KindPower:
		_, ok = impl.(PowerInterface)
	case KindRAID:
		_, ok = impl.(RAIDInterface)
	case KindRescue:
		_, ok = impl.(RescueInterface)
	case KindStorage:
		_, ok = impl.(StorageInterface)
	case KindVendor:
		_, ok = impl.(VendorInterface)
	}
	return ok
}

// InspectionData is what an in-band inspection ramdisk reported: the raw
// hardware inventory (IPA's JSON document) and the plugin data (every
// other top-level key the ramdisk posted, such as boot_interface,
// root_disk or error).
type InspectionData struct {
	Inventory  json.RawMessage `json:"inventory"`
	PluginData map[string]any  `json:"plugin_data,omitempty"`
}

// InbandInspector is an optional capability of an inspect interface whose
// inspection runs in the ramdisk (Ironic's "agent" inspect interface).
// InspectHardware returns StepResult{Wait: true, RebootRequested: true}
// after setting what the boot interface needs; the conductor then
// prepares the ramdisk boot, reboots the node and leaves it in "inspect
// wait". When the ramdisk posts its data, the conductor calls
// ContinueInspection under the node's exclusive lock; it records what it
// found with t.SetProperty and t.AddPort/t.SetPorts. An error fails the
// inspection ("inspect failed" with last_error).
type InbandInspector interface {
	InspectInterface
	ContinueInspection(ctx context.Context, t *Task, data InspectionData) error
}
