package driver

import (
	"context"
	"errors"
	"fmt"
)

// NMIInjector is an optional capability of a management interface that
// can send a diagnostic (non-maskable) interrupt to the node, as Ironic's
// inject_nmi.
type NMIInjector interface {
	InjectNMI(ctx context.Context, t *Task) error
}

// IndicatorState is the state of a node's identification indicator, with
// Ironic's values.
type IndicatorState string

// Indicator states.
const (
	IndicatorOn       IndicatorState = "on"
	IndicatorOff      IndicatorState = "off"
	IndicatorBlinking IndicatorState = "blinking"
	IndicatorUnknown  IndicatorState = "unknown"
)

// Valid reports whether s is one of the states SetIndicatorState accepts
// (on, off, blinking).
func (s IndicatorState) Valid() bool {
	return s == IndicatorOn || s == IndicatorOff || s == IndicatorBlinking
}

// IndicatorManager is an optional capability of a management interface
// that reads and sets the node's identification indicator (the chassis
// LED). SetIndicatorState accepts IndicatorOn, IndicatorOff and
// IndicatorBlinking; an implementation whose hardware cannot blink
// returns an *InvalidParameterError for it.
type IndicatorManager interface {
	GetIndicatorState(ctx context.Context, t *Task) (IndicatorState, error)
	SetIndicatorState(ctx context.Context, t *Task, state IndicatorState) error
}

// SecureBootManager is an optional capability of a management interface
// that reads and sets UEFI secure boot, as Ironic's get_secure_boot_state
// and set_secure_boot_state.
type SecureBootManager interface {
	GetSecureBootState(ctx context.Context, t *Task) (bool, error)
	SetSecureBootState(ctx context.Context, t *Task, enabled bool) error
}

// SensorType classifies a sensor reading, with the names Ironic groups
// sensor data under.
type SensorType string

// Sensor types.
const (
	SensorTemperature SensorType = "Temperature"
	SensorFan         SensorType = "Fan"
	SensorVoltage     SensorType = "Voltage"
	SensorCurrent     SensorType = "Current"
	SensorPower       SensorType = "Power"
	SensorOther       SensorType = "Other"
)

// SensorReading is one sensor's reading. Value is nil when the sensor has
// no numeric reading (a discrete sensor, or one the BMC reports as not
// available); Reading then keeps what the BMC said.
type SensorReading struct {
	Name    string     `json:"name"`
	Type    SensorType `json:"type"`
	Value   *float64   `json:"value,omitempty"`
	Units   string     `json:"units,omitempty"`
	Reading string     `json:"reading,omitempty"`
	// Status is the health the BMC reports ("ok", "ns", "cr", ...).
	Status string `json:"status,omitempty"`
}

// SensorReader is an optional capability of a management interface that
// reads the node's sensors (Ironic's get_sensors_data), typed.
type SensorReader interface {
	Sensors(ctx context.Context, t *Task) ([]SensorReading, error)
}

// Health is a node's hardware health as the BMC reports it, with
// Ironic's values (ironic.common.health_states): the node's health field.
type Health string

// Health values. HealthUnknown (Ironic's None) is what a BMC that reports
// no health gives.
const (
	HealthOK       Health = "OK"
	HealthWarning  Health = "Warning"
	HealthCritical Health = "Critical"
	HealthUnknown  Health = ""
)

// Worse returns the worse of h and o (Critical over Warning over OK over
// unknown).
func (h Health) Worse(o Health) Health {
	rank := func(x Health) int {
		switch x {
		case HealthCritical:
			return 3
		case HealthWarning:
			return 2
		case HealthOK:
			return 1
		}
		return 0
	}
	if rank(o) > rank(h) {
		return o
	}
	return h
}

// HealthReader is an optional capability of a management interface that
// reads the node's hardware health from its BMC (Ironic's
// get_node_health). The conductor calls it on every power state sync
// when health monitoring is on and stores the result in the node's
// health field. A value other than the Health constants is ignored, as
// Ironic ignores one that is not a HealthState.
type HealthReader interface {
	Health(ctx context.Context, t *Task) (Health, error)
}

// VirtualMediaDevice is the device a virtual media image is attached as,
// with Ironic's values (boot_devices.VMEDIA_DEVICES).
type VirtualMediaDevice string

// Virtual media devices.
const (
	VirtualMediaDisk   VirtualMediaDevice = "disk"
	VirtualMediaCDROM  VirtualMediaDevice = "cdrom"
	VirtualMediaFloppy VirtualMediaDevice = "floppy"
)

// VirtualMediaDevices returns the device types virtual media can be
// attached as, in Ironic's order. The caller owns the returned slice.
func VirtualMediaDevices() []VirtualMediaDevice {
	return []VirtualMediaDevice{VirtualMediaDisk, VirtualMediaCDROM, VirtualMediaFloppy}
}

// Valid reports whether d is one of VirtualMediaDevices.
func (d VirtualMediaDevice) Valid() bool {
	return d == VirtualMediaDisk || d == VirtualMediaCDROM || d == VirtualMediaFloppy
}

// VirtualMedia is one virtual media device of a node as its BMC reports
// it, the entries of Ironic's get_virtual_media: the media types it
// accepts (Redfish's "CD", "DVD", "USBStick", "Floppy"), whether an image
// is inserted and which.
type VirtualMedia struct {
	MediaTypes []string `json:"media_types"`
	Inserted   bool     `json:"inserted"`
	Image      string   `json:"image"`
}

// VirtualMediaManager is an optional capability of a management interface
// that attaches images as virtual media devices, as Ironic's
// attach_virtual_media, detach_virtual_media and get_virtual_media.
// AttachVirtualMedia inserts the image at imageURL (the BMC fetches it)
// as device, replacing what that device held; DetachVirtualMedia ejects
// the given devices, every device when devices is empty, and tolerates a
// device with nothing inserted; VirtualMedia lists the devices.
type VirtualMediaManager interface {
	AttachVirtualMedia(ctx context.Context, t *Task, device VirtualMediaDevice, imageURL string) error
	DetachVirtualMedia(ctx context.Context, t *Task, devices []VirtualMediaDevice) error
	VirtualMedia(ctx context.Context, t *Task) ([]VirtualMedia, error)
}

// AvailabilityReporter is an optional capability of any implementation
// whose prerequisites on this host may be missing (a command-line tool, a
// device). Unavailable returns nil when the implementation can work, or an
// error matching ErrUnavailable that says why not. It is cheap and does
// not talk to hardware.
type AvailabilityReporter interface {
	Unavailable() error
}

// Available returns nil when impl can work on this host, or the
// *UnavailableError (matching ErrUnavailable) its AvailabilityReporter
// gives. Implementations without the capability are available.
func Available(impl Interface) error {
	ar, ok := As[AvailabilityReporter](impl)
	if !ok {
		return nil
	}
	return ar.Unavailable()
}

// UnavailableError says an implementation cannot work on this host and
// why (for example "ipmitool is not installed").
type UnavailableError struct {
	Kind   Kind
	Impl   string
	Reason string
	// Err is the underlying cause, when known (not carried across a plugin
	// boundary).
	Err error `json:"-"`
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%s/%s: unavailable on this host: %s", e.Kind, e.Impl, e.Reason)
}

// Is matches ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// NewUnavailableError returns an *UnavailableError for kind/impl whose
// reason is cause's message. A nil cause yields nil.
func NewUnavailableError(kind Kind, impl string, cause error) error {
	if cause == nil {
		return nil
	}
	var ue *UnavailableError
	if errors.As(cause, &ue) && ue.Kind == kind && ue.Impl == impl {
		return cause
	}
	return &UnavailableError{Kind: kind, Impl: impl, Reason: cause.Error(), Err: cause}
}
