// Package noop implements Ironic's no-op interfaces, registered by
// builtin.Bundle. Two families share the package:
//
//   - the "no-<kind>" implementations (BIOS is no-bios, Console no-console,
//     and Firmware, Inspect, RAID, Rescue, Vendor likewise), for a kind a
//     hardware type does not support: every operation, Validate included,
//     fails with *driver.UnsupportedError, as Ironic's FailMixin does;
//   - the "noop" implementations (Network, Storage, Management, Deploy),
//     for work done elsewhere: every operation succeeds without effect.
//
// Their names are the driver.NoBIOS, ..., driver.Noop constants, which the
// registry's defaults (driver.HardwareType.SupportedFor) refer to.
package noop

import (
	"context"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/steps"
)

// unsupported is the shared body of the no-op implementations (Ironic's
// FailMixin): every operation, Validate included, fails with
// *driver.UnsupportedError.
type unsupported struct {
	kind driver.Kind
	name string
}

func (u unsupported) err(op string) error {
	return &driver.UnsupportedError{Kind: u.kind, Impl: u.name, Operation: op}
}

// Properties returns no properties.
func (u unsupported) Properties() []driver.Property { return nil }

// Validate reports that the interface is not supported.
func (u unsupported) Validate(context.Context, *driver.Task) error { return u.err("validate") }

// BIOS is the "no-bios" implementation.
type BIOS struct{ unsupported }

// NewBIOS returns the "no-bios" implementation.
func NewBIOS() *BIOS {
	return &BIOS{unsupported{driver.KindBIOS, driver.NoBIOS}}
}

// CacheBIOSSettings fails with *driver.UnsupportedError.
func (n *BIOS) CacheBIOSSettings(context.Context, *driver.Task) ([]driver.BIOSSetting, error) {
	return nil, n.err("cache_bios_settings")
}

// RAID is the "no-raid" implementation.
type RAID struct{ unsupported }

// NewRAID returns the "no-raid" implementation.
func NewRAID() *RAID {
	return &RAID{unsupported{driver.KindRAID, driver.NoRAID}}
}

// ValidateRAIDConfig fails with *driver.UnsupportedError.
func (n *RAID) ValidateRAIDConfig(context.Context, *driver.Task, map[string]any) error {
	return n.err("validate_raid_config")
}

// Console is the "no-console" implementation.
type Console struct{ unsupported }

// NewConsole returns the "no-console" implementation.
func NewConsole() *Console {
	return &Console{unsupported{driver.KindConsole, driver.NoConsole}}
}

// StartConsole fails with *driver.UnsupportedError.
func (n *Console) StartConsole(context.Context, *driver.Task) error {
	return n.err("start_console")
}

// StopConsole fails with *driver.UnsupportedError.
func (n *Console) StopConsole(context.Context, *driver.Task) error {
	return n.err("stop_console")
}

// GetConsole fails with *driver.UnsupportedError.
func (n *Console) GetConsole(context.Context, *driver.Task) (driver.ConsoleInfo, error) {
	return driver.ConsoleInfo{}, n.err("get_console")
}

// Vendor is the "no-vendor" implementation.
type Vendor struct{ unsupported }

// NewVendor returns the "no-vendor" implementation.
func NewVendor() *Vendor {
	return &Vendor{unsupported{driver.KindVendor, driver.NoVendor}}
}

// Methods returns no methods.
func (n *Vendor) Methods() []driver.VendorMethod { return nil }

// Call fails with *driver.UnsupportedError.
func (n *Vendor) Call(_ context.Context, _ *driver.Task, method, _ string, _ map[string]any) (any, error) {
	return nil, n.err("vendor passthru " + method)
}

// Rescue is the "no-rescue" implementation.
type Rescue struct{ unsupported }

// NewRescue returns the "no-rescue" implementation.
func NewRescue() *Rescue {
	return &Rescue{unsupported{driver.KindRescue, driver.NoRescue}}
}

// Rescue fails with *driver.UnsupportedError.
func (n *Rescue) Rescue(context.Context, *driver.Task) (driver.StepResult, error) {
	return driver.StepResult{}, n.err("rescue")
}

// Unrescue fails with *driver.UnsupportedError.
func (n *Rescue) Unrescue(context.Context, *driver.Task) error { return n.err("unrescue") }

// CleanUp fails with *driver.UnsupportedError.
func (n *Rescue) CleanUp(context.Context, *driver.Task) error { return n.err("clean_up") }

// Firmware is the "no-firmware" implementation.
type Firmware struct{ unsupported }

// NewFirmware returns the "no-firmware" implementation.
func NewFirmware() *Firmware {
	return &Firmware{unsupported{driver.KindFirmware, driver.NoFirmware}}
}

// CacheFirmwareComponents fails with *driver.UnsupportedError.
func (n *Firmware) CacheFirmwareComponents(context.Context, *driver.Task) ([]driver.FirmwareComponent, error) {
	return nil, n.err("cache_firmware_components")
}

// Inspect is the "no-inspect" implementation.
type Inspect struct{ unsupported }

// NewInspect returns the "no-inspect" implementation.
func NewInspect() *Inspect {
	return &Inspect{unsupported{driver.KindInspect, driver.NoInspect}}
}

// InspectHardware fails with *driver.UnsupportedError.
func (n *Inspect) InspectHardware(context.Context, *driver.Task) (driver.StepResult, error) {
	return driver.StepResult{}, n.err("inspect_hardware")
}

// Network is the "noop" network implementation: every operation
// succeeds and does nothing (for flat networks managed elsewhere).
type Network struct{}

// Properties returns no properties.
func (Network) Properties() []driver.Property { return nil }

// Validate accepts every node (unless ctx is done).
func (Network) Validate(ctx context.Context, _ *driver.Task) error { return ctx.Err() }

// AddNetwork does nothing.
func (Network) AddNetwork(ctx context.Context, _ *driver.Task, _ driver.NetworkPurpose) error {
	return ctx.Err()
}

// RemoveNetwork does nothing.
func (Network) RemoveNetwork(ctx context.Context, _ *driver.Task, _ driver.NetworkPurpose) error {
	return ctx.Err()
}

// FlatNetwork is the "flat" network implementation (driver.Flat):
// Ironic's interface for one shared, flat network used for provisioning,
// cleaning and the tenant alike. Ironic's binds the node's VIFs (Neutron
// ports) to the node when it joins the tenant network; Anvil has no
// Neutron, so there is nothing to bind and every operation succeeds
// without effect. The VIFs themselves are recorded by the API on the
// node's ports and port groups (tenant_vif_port_id), as for noop.
type FlatNetwork struct{}

// Properties returns no properties.
func (FlatNetwork) Properties() []driver.Property { return nil }

// Validate accepts every node (unless ctx is done): Ironic's checks the
// Neutron cleaning network, which Anvil does not have.
func (FlatNetwork) Validate(ctx context.Context, _ *driver.Task) error { return ctx.Err() }

// AddNetwork does nothing: the node is always on the flat network.
func (FlatNetwork) AddNetwork(ctx context.Context, _ *driver.Task, _ driver.NetworkPurpose) error {
	return ctx.Err()
}

// RemoveNetwork does nothing.
func (FlatNetwork) RemoveNetwork(ctx context.Context, _ *driver.Task, _ driver.NetworkPurpose) error {
	return ctx.Err()
}

// Storage is the "noop" storage implementation: no volumes, the image
// is always written to a local disk.
type Storage struct{}

// Properties returns no properties.
func (Storage) Properties() []driver.Property { return nil }

// Validate accepts every node (unless ctx is done).
func (Storage) Validate(ctx context.Context, _ *driver.Task) error { return ctx.Err() }

// AttachVolumes does nothing.
func (Storage) AttachVolumes(ctx context.Context, _ *driver.Task) error { return ctx.Err() }

// DetachVolumes does nothing.
func (Storage) DetachVolumes(ctx context.Context, _ *driver.Task) error { return ctx.Err() }

// ShouldWriteImage returns true.
func (Storage) ShouldWriteImage(ctx context.Context, _ *driver.Task) (bool, error) {
	return ctx.Err() == nil, ctx.Err()
}

// Management is the "noop" management implementation of
// manual-management: boot devices are set by hand, so setting one succeeds
// without effect and the current device is unknown.
type Management struct{}

// Properties returns no properties.
func (Management) Properties() []driver.Property { return nil }

// Validate accepts every node (unless ctx is done).
func (Management) Validate(ctx context.Context, _ *driver.Task) error { return ctx.Err() }

// SupportedBootDevices returns every boot device.
func (Management) SupportedBootDevices(ctx context.Context, _ *driver.Task) ([]driver.BootDevice, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []driver.BootDevice{driver.BootPXE, driver.BootDisk, driver.BootCDROM, driver.BootBIOS, driver.BootSafe, driver.BootWANBoot, driver.BootUEFIHTTP}, nil
}

// SetBootDevice does nothing.
func (Management) SetBootDevice(ctx context.Context, _ *driver.Task, _ driver.BootDevice, _ bool) error {
	return ctx.Err()
}

// GetBootDevice reports an unknown device.
func (Management) GetBootDevice(ctx context.Context, _ *driver.Task) (driver.BootDeviceState, error) {
	return driver.BootDeviceState{}, ctx.Err()
}

// Deploy is the "noop" deploy implementation of manual-management: the
// instance is put in place by someone else, so every operation succeeds at
// once. Its core deploy step "deploy" has priority 100.
type Deploy struct{}

// Properties returns no properties.
func (Deploy) Properties() []driver.Property { return nil }

// Validate accepts every node (unless ctx is done).
func (Deploy) Validate(ctx context.Context, _ *driver.Task) error { return ctx.Err() }

// Prepare does nothing.
func (Deploy) Prepare(ctx context.Context, _ *driver.Task) error { return ctx.Err() }

// Deploy finishes at once.
func (Deploy) Deploy(ctx context.Context, _ *driver.Task) (driver.StepResult, error) {
	return driver.StepResult{}, ctx.Err()
}

// TearDown does nothing.
func (Deploy) TearDown(ctx context.Context, _ *driver.Task) error { return ctx.Err() }

// CleanUp does nothing.
func (Deploy) CleanUp(ctx context.Context, _ *driver.Task) error { return ctx.Err() }

// TakeOver does nothing.
func (Deploy) TakeOver(ctx context.Context, _ *driver.Task) error { return ctx.Err() }

// Steps returns the core deploy step.
func (Deploy) Steps(kind steps.Kind) []steps.Step {
	if kind == steps.Deploy {
		return []steps.Step{coreDeployStep()}
	}
	return nil
}

// ExecuteStep runs the core deploy step.
func (d Deploy) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, s steps.Step) (driver.StepResult, error) {
	if kind == steps.Deploy && s.Name == "deploy" {
		return d.Deploy(ctx, t)
	}
	return driver.StepResult{}, &driver.StepNotFoundError{Kind: driver.KindDeploy, Impl: driver.Noop, StepKind: string(kind), Step: s.Name}
}

// coreDeployStep is the deploy.deploy step every deploy interface has
// (Ironic's DeployInterface.deploy, decorated with priority 100).
func coreDeployStep() steps.Step {
	return steps.Step{Interface: string(driver.KindDeploy), Name: "deploy", Priority: 100, Abortable: true}
}

// Interface guards.
var (
	_ driver.BIOSInterface       = (*BIOS)(nil)
	_ driver.RAIDInterface       = (*RAID)(nil)
	_ driver.ConsoleInterface    = (*Console)(nil)
	_ driver.VendorInterface     = (*Vendor)(nil)
	_ driver.RescueInterface     = (*Rescue)(nil)
	_ driver.FirmwareInterface   = (*Firmware)(nil)
	_ driver.InspectInterface    = (*Inspect)(nil)
	_ driver.NetworkInterface    = Network{}
	_ driver.NetworkInterface    = FlatNetwork{}
	_ driver.StorageInterface    = Storage{}
	_ driver.ManagementInterface = Management{}
	_ driver.DeployInterface     = Deploy{}
	_ driver.StepProvider        = Deploy{}
	_ driver.StepRunner          = Deploy{}
)
