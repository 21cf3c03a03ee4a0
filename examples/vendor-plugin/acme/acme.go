// Package acme is the driver code of the example vendor plugin: an "acme"
// hardware type with its own power, management and vendor
// implementations. Every other kind reuses implementations the host
// already has (the built-in fake boot and deploy, the no-op interfaces),
// which is why the hardware type only names them.
//
// The Acme BMC here is simulated: its state lives in driver_internal_info,
// as a real driver would keep what it learnt from the BMC (the node row is
// the only state; plugins are stateless). A real vendor replaces the
// bodies of the bmc* helpers with calls to its BMC API.
package acme

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/fake"
)

// Name is the hardware type and implementation name.
const Name = "acme"

// driver_info properties.
const (
	PropAddress  = "acme_address"
	PropUsername = "acme_username"
	PropPassword = "acme_password"
	PropTimeout  = "acme_timeout"
)

// driver_internal_info keys of the simulated BMC.
const (
	keyPower      = "acme_power_state"
	keyBootDevice = "acme_boot_device"
	keyPersistent = "acme_boot_persistent"
	keyResets     = "acme_bmc_resets"
)

func properties() []driver.Property {
	return []driver.Property{
		{Name: PropAddress, Description: "Acme BMC address, host:port. Required.", Required: true},
		{Name: PropUsername, Description: "Acme BMC user name. Required.", Required: true},
		{Name: PropPassword, Description: "Acme BMC password. Required; never logged.", Required: true},
		{Name: PropTimeout, Description: "Per-request timeout as a Go duration (default 10s). Optional."},
	}
}

// HardwareType returns the acme hardware type: acme power, management
// and vendor; boot and deploy reuse built-in implementations (a real
// deployment would list ipxe and direct first); the other kinds keep
// Ironic's no-op defaults.
func HardwareType() driver.HardwareType {
	return driver.HardwareType{
		Name: Name,
		Supported: map[driver.Kind][]string{
			driver.KindPower:      {Name},
			driver.KindManagement: {Name},
			driver.KindVendor:     {Name, driver.NoVendor},
			driver.KindBoot:       {"ipxe", "pxe", fake.Name},
			driver.KindDeploy:     {"direct", driver.Noop, fake.Name},
		},
	}
}

// Bundle returns what the plugin serves.
func Bundle() driver.Bundle {
	return driver.Bundle{
		HardwareTypes: []driver.HardwareType{HardwareType()},
		Implementations: []driver.Implementation{
			{Kind: driver.KindPower, Name: Name, Impl: &Power{}},
			{Kind: driver.KindManagement, Name: Name, Impl: &Management{}},
			{Kind: driver.KindVendor, Name: Name, Impl: &Vendor{}},
		},
	}
}

// validate checks the shared driver_info of every acme interface.
func validate(ctx context.Context, kind driver.Kind, t *driver.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.RequireDriverInfo(kind, Name, properties()); err != nil {
		return err
	}
	addr, _ := t.DriverInfoString(PropAddress)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: kind, Impl: Name, Field: "driver_info", Key: PropAddress, Expected: "host:port"}
	}
	if s, ok := t.DriverInfoString(PropTimeout); ok {
		if _, err := time.ParseDuration(s); err != nil {
			return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: kind, Impl: Name, Field: "driver_info", Key: PropTimeout, Expected: "a Go duration such as 10s"}
		}
	}
	return nil
}

// Power is the acme power implementation.
type Power struct{}

// Properties returns the acme driver_info properties.
func (*Power) Properties() []driver.Property { return properties() }

// Validate checks the driver_info.
func (*Power) Validate(ctx context.Context, t *driver.Task) error {
	return validate(ctx, driver.KindPower, t)
}

// GetPowerState asks the (simulated) BMC.
func (*Power) GetPowerState(ctx context.Context, t *driver.Task) (driver.PowerState, error) {
	if err := validate(ctx, driver.KindPower, t); err != nil {
		return driver.PowerUnknown, err
	}
	if s, ok := t.InternalString(keyPower); ok {
		return driver.PowerState(s), nil
	}
	return driver.PowerOff, nil
}

// SetPowerState drives the (simulated) BMC to target.
func (*Power) SetPowerState(ctx context.Context, t *driver.Task, target driver.PowerState, _ time.Duration) error {
	if err := validate(ctx, driver.KindPower, t); err != nil {
		return err
	}
	switch target {
	case driver.PowerOn, driver.Reboot, driver.SoftReboot:
		t.SetDriverInternalInfo(keyPower, string(driver.PowerOn))
	case driver.PowerOff, driver.SoftPowerOff:
		t.SetDriverInternalInfo(keyPower, string(driver.PowerOff))
	default:
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindPower, Impl: Name, Field: "target", Key: "power_state", Expected: fmt.Sprintf("a power state, got %q", target)}
	}
	return nil
}

// Reboot power-cycles the node.
func (p *Power) Reboot(ctx context.Context, t *driver.Task, timeout time.Duration) error {
	return p.SetPowerState(ctx, t, driver.PowerOn, timeout)
}

// Management is the acme management implementation.
type Management struct{}

var bootDevices = []driver.BootDevice{driver.BootPXE, driver.BootDisk, driver.BootCDROM}

// Properties returns the acme driver_info properties.
func (*Management) Properties() []driver.Property { return properties() }

// Validate checks the driver_info.
func (*Management) Validate(ctx context.Context, t *driver.Task) error {
	return validate(ctx, driver.KindManagement, t)
}

// SupportedBootDevices returns pxe, disk and cdrom.
func (*Management) SupportedBootDevices(ctx context.Context, t *driver.Task) ([]driver.BootDevice, error) {
	if err := validate(ctx, driver.KindManagement, t); err != nil {
		return nil, err
	}
	return slices.Clone(bootDevices), nil
}

// SetBootDevice sets the next boot device.
func (*Management) SetBootDevice(ctx context.Context, t *driver.Task, device driver.BootDevice, persistent bool) error {
	if err := validate(ctx, driver.KindManagement, t); err != nil {
		return err
	}
	if !slices.Contains(bootDevices, device) {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindManagement, Impl: Name, Field: "args", Key: "boot_device", Expected: fmt.Sprintf("one of %v, got %q", bootDevices, device)}
	}
	t.SetDriverInternalInfo(keyBootDevice, string(device))
	t.SetDriverInternalInfo(keyPersistent, persistent)
	return nil
}

// GetBootDevice returns the boot device.
func (*Management) GetBootDevice(ctx context.Context, t *driver.Task) (driver.BootDeviceState, error) {
	if err := validate(ctx, driver.KindManagement, t); err != nil {
		return driver.BootDeviceState{}, err
	}
	dev, ok := t.InternalString(keyBootDevice)
	if !ok {
		return driver.BootDeviceState{}, nil
	}
	p, _ := t.DriverInternalInfo[keyPersistent].(bool)
	return driver.BootDeviceState{Device: driver.BootDevice(dev), Persistent: &p}, nil
}

// Vendor is the acme vendor implementation with two passthru methods:
// bmc_info (GET) and reset_bmc (POST, async).
type Vendor struct{}

// Properties returns the acme driver_info properties.
func (*Vendor) Properties() []driver.Property { return properties() }

// Validate checks the driver_info.
func (*Vendor) Validate(ctx context.Context, t *driver.Task) error {
	return validate(ctx, driver.KindVendor, t)
}

// Methods lists the passthru methods.
func (*Vendor) Methods() []driver.VendorMethod {
	return []driver.VendorMethod{
		{Name: "bmc_info", Description: "Returns the BMC address and how often it was reset.", HTTPMethods: []string{"GET"}},
		{Name: "reset_bmc", Description: "Resets the BMC.", HTTPMethods: []string{"POST"}, Async: true},
	}
}

// Call runs a passthru method.
func (v *Vendor) Call(ctx context.Context, t *driver.Task, method, httpMethod string, _ map[string]any) (any, error) {
	if err := validate(ctx, driver.KindVendor, t); err != nil {
		return nil, err
	}
	idx := slices.IndexFunc(v.Methods(), func(m driver.VendorMethod) bool { return m.Name == method })
	if idx < 0 {
		return nil, &driver.UnsupportedError{Kind: driver.KindVendor, Impl: Name, Operation: "vendor passthru " + method}
	}
	if m := v.Methods()[idx]; !slices.Contains(m.HTTPMethods, httpMethod) {
		return nil, &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindVendor, Impl: Name, Field: "http_method", Key: method, Expected: fmt.Sprintf("one of %v", m.HTTPMethods)}
	}
	resets, _ := t.DriverInternalInfo[keyResets].(float64)
	if method == "reset_bmc" {
		resets++
		t.SetDriverInternalInfo(keyResets, resets)
	}
	addr, _ := t.DriverInfoString(PropAddress)
	return map[string]any{"address": addr, "resets": resets}, nil
}

// Interface guards.
var (
	_ driver.PowerInterface      = (*Power)(nil)
	_ driver.ManagementInterface = (*Management)(nil)
	_ driver.VendorInterface     = (*Vendor)(nil)
)
