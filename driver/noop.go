package driver

import (
	"context"
	"time"

	"github.com/anvilmetal/anvil/steps"
)

// Implementation names of the built-ins.
const (
	Fake       = "fake"
	Noop       = "noop"
	NoBIOS     = "no-bios"
	NoConsole  = "no-console"
	NoFirmware = "no-firmware"
	NoInspect  = "no-inspect"
	NoRAID     = "no-raid"
	NoRescue   = "no-rescue"
	NoVendor   = "no-vendor"
)

// unsupported is the shared body of the no-op implementations (Ironic's
// FailMixin): every operation, Validate included, fails with
// *UnsupportedError.
type unsupported struct {
	kind Kind
	name string
}

func (u unsupported) err(op string) error {
	return &UnsupportedError{Kind: u.kind, Impl: u.name, Operation: op}
}

// Properties returns no properties.
func (u unsupported) Properties() []Property { return nil }

// Validate reports that the interface is not supported.
func (u unsupported) Validate(context.Context, *Task) error { return u.err("validate") }

// NoBIOSInterface is the "no-bios" implementation.
type NoBIOSInterface struct{ unsupported }

// NewNoBIOS returns the "no-bios" implementation.
func NewNoBIOS() *NoBIOSInterface { return &NoBIOSInterface{unsupported{KindBIOS, NoBIOS}} }

// CacheBIOSSettings fails with *UnsupportedError.
func (n *NoBIOSInterface) CacheBIOSSettings(context.Context, *Task) ([]BIOSSetting, error) {
	return nil, n.err("cache_bios_settings")
}

// NoRAIDInterface is the "no-raid" implementation.
type NoRAIDInterface struct{ unsupported }

// NewNoRAID returns the "no-raid" implementation.
func NewNoRAID() *NoRAIDInterface { return &NoRAIDInterface{unsupported{KindRAID, NoRAID}} }

// ValidateRAIDConfig fails with *UnsupportedError.
func (n *NoRAIDInterface) ValidateRAIDConfig(context.Context, *Task, map[string]any) error {
	return n.err("validate_raid_config")
}

// NoConsoleInterface is the "no-console" implementation.
type NoConsoleInterface struct{ unsupported }

// NewNoConsole returns the "no-console" implementation.
func NewNoConsole() *NoConsoleInterface {
	return &NoConsoleInterface{unsupported{KindConsole, NoConsole}}
}

// StartConsole fails with *UnsupportedError.
func (n *NoConsoleInterface) StartConsole(context.Context, *Task) error {
	return n.err("start_console")
}

// StopConsole fails with *UnsupportedError.
func (n *NoConsoleInterface) StopConsole(context.Context, *Task) error { return n.err("stop_console") }

// GetConsole fails with *UnsupportedError.
func (n *NoConsoleInterface) GetConsole(context.Context, *Task) (ConsoleInfo, error) {
	return ConsoleInfo{}, n.err("get_console")
}

// NoVendorInterface is the "no-vendor" implementation.
type NoVendorInterface struct{ unsupported }

// NewNoVendor returns the "no-vendor" implementation.
func NewNoVendor() *NoVendorInterface { return &NoVendorInterface{unsupported{KindVendor, NoVendor}} }

// Methods returns no methods.
func (n *NoVendorInterface) Methods() []VendorMethod { return nil }

// Call fails with *UnsupportedError.
func (n *NoVendorInterface) Call(_ context.Context, _ *Task, method, _ string, _ map[string]any) (any, error) {
	return nil, n.err("vendor passthru " + method)
}

// NoRescueInterface is the "no-rescue" implementation.
type NoRescueInterface struct{ unsupported }

// NewNoRescue returns the "no-rescue" implementation.
func NewNoRescue() *NoRescueInterface { return &NoRescueInterface{unsupported{KindRescue, NoRescue}} }

// Rescue fails with *UnsupportedError.
func (n *NoRescueInterface) Rescue(context.Context, *Task) (StepResult, error) {
	return StepResult{}, n.err("rescue")
}

// Unrescue fails with *UnsupportedError.
func (n *NoRescueInterface) Unrescue(context.Context, *Task) error { return n.err("unrescue") }

// CleanUp fails with *UnsupportedError.
func (n *NoRescueInterface) CleanUp(context.Context, *Task) error { return n.err("clean_up") }

// NoFirmwareInterface is the "no-firmware" implementation.
type NoFirmwareInterface struct{ unsupported }

// NewNoFirmware returns the "no-firmware" implementation.
func NewNoFirmware() *NoFirmwareInterface {
	return &NoFirmwareInterface{unsupported{KindFirmware, NoFirmware}}
}

// CacheFirmwareComponents fails with *UnsupportedError.
func (n *NoFirmwareInterface) CacheFirmwareComponents(context.Context, *Task) ([]FirmwareComponent, error) {
	return nil, n.err("cache_firmware_components")
}

// NoInspectInterface is the "no-inspect" implementation.
type NoInspectInterface struct{ unsupported }

// NewNoInspect returns the "no-inspect" implementation.
func NewNoInspect() *NoInspectInterface {
	return &NoInspectInterface{unsupported{KindInspect, NoInspect}}
}

// InspectHardware fails with *UnsupportedError.
func (n *NoInspectInterface) InspectHardware(context.Context, *Task) (StepResult, error) {
	return StepResult{}, n.err("inspect_hardware")
}

// NoopNetwork is the "noop" network implementation: every operation
// succeeds and does nothing (for flat networks managed elsewhere).
type NoopNetwork struct{}

// Properties returns no properties.
func (NoopNetwork) Properties() []Property { return nil }

// Validate accepts every node (unless ctx is done).
func (NoopNetwork) Validate(ctx context.Context, _ *Task) error { return ctx.Err() }

// AddNetwork does nothing.
func (NoopNetwork) AddNetwork(ctx context.Context, _ *Task, _ NetworkPurpose) error { return ctx.Err() }

// RemoveNetwork does nothing.
func (NoopNetwork) RemoveNetwork(ctx context.Context, _ *Task, _ NetworkPurpose) error {
	return ctx.Err()
}

// NoopStorage is the "noop" storage implementation: no volumes, the image
// is always written to a local disk.
type NoopStorage struct{}

// Properties returns no properties.
func (NoopStorage) Properties() []Property { return nil }

// Validate accepts every node (unless ctx is done).
func (NoopStorage) Validate(ctx context.Context, _ *Task) error { return ctx.Err() }

// AttachVolumes does nothing.
func (NoopStorage) AttachVolumes(ctx context.Context, _ *Task) error { return ctx.Err() }

// DetachVolumes does nothing.
func (NoopStorage) DetachVolumes(ctx context.Context, _ *Task) error { return ctx.Err() }

// ShouldWriteImage returns true.
func (NoopStorage) ShouldWriteImage(ctx context.Context, _ *Task) (bool, error) {
	return ctx.Err() == nil, ctx.Err()
}

// NoopManagement is the "noop" management implementation of
// manual-management: boot devices are set by hand, so setting one succeeds
// without effect and the current device is unknown.
type NoopManagement struct{}

// Properties returns no properties.
func (NoopManagement) Properties() []Property { return nil }

// Validate accepts every node (unless ctx is done).
func (NoopManagement) Validate(ctx context.Context, _ *Task) error { return ctx.Err() }

// SupportedBootDevices returns every boot device.
func (NoopManagement) SupportedBootDevices(ctx context.Context, _ *Task) ([]BootDevice, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []BootDevice{BootPXE, BootDisk, BootCDROM, BootBIOS, BootSafe, BootWANBoot, BootUEFIHTTP}, nil
}

// SetBootDevice does nothing.
func (NoopManagement) SetBootDevice(ctx context.Context, _ *Task, _ BootDevice, _ bool) error {
	return ctx.Err()
}

// GetBootDevice reports an unknown device.
func (NoopManagement) GetBootDevice(ctx context.Context, _ *Task) (BootDeviceState, error) {
	return BootDeviceState{}, ctx.Err()
}

// NoopDeploy is the "noop" deploy implementation of manual-management: the
// instance is put in place by someone else, so every operation succeeds at
// once. Its core deploy step "deploy" has priority 100.
type NoopDeploy struct{}

// Properties returns no properties.
func (NoopDeploy) Properties() []Property { return nil }

// Validate accepts every node (unless ctx is done).
func (NoopDeploy) Validate(ctx context.Context, _ *Task) error { return ctx.Err() }

// Prepare does nothing.
func (NoopDeploy) Prepare(ctx context.Context, _ *Task) error { return ctx.Err() }

// Deploy finishes at once.
func (NoopDeploy) Deploy(ctx context.Context, _ *Task) (StepResult, error) {
	return StepResult{}, ctx.Err()
}

// TearDown does nothing.
func (NoopDeploy) TearDown(ctx context.Context, _ *Task) error { return ctx.Err() }

// CleanUp does nothing.
func (NoopDeploy) CleanUp(ctx context.Context, _ *Task) error { return ctx.Err() }

// TakeOver does nothing.
func (NoopDeploy) TakeOver(ctx context.Context, _ *Task) error { return ctx.Err() }

// Steps returns the core deploy step.
func (NoopDeploy) Steps(kind steps.Kind) []steps.Step {
	if kind == steps.Deploy {
		return []steps.Step{coreDeployStep()}
	}
	return nil
}

// ExecuteStep runs the core deploy step.
func (d NoopDeploy) ExecuteStep(ctx context.Context, t *Task, kind steps.Kind, s steps.Step) (StepResult, error) {
	if kind == steps.Deploy && s.Name == "deploy" {
		return d.Deploy(ctx, t)
	}
	return StepResult{}, &StepNotFoundError{Kind: KindDeploy, Impl: Noop, StepKind: string(kind), Step: s.Name}
}

// coreDeployStep is the deploy.deploy step every deploy interface has
// (Ironic's DeployInterface.deploy, decorated with priority 100).
func coreDeployStep() steps.Step {
	return steps.Step{Interface: string(KindDeploy), Name: "deploy", Priority: 100, Abortable: true}
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// Interface guards.
var (
	_ BIOSInterface       = (*NoBIOSInterface)(nil)
	_ RAIDInterface       = (*NoRAIDInterface)(nil)
	_ ConsoleInterface    = (*NoConsoleInterface)(nil)
	_ VendorInterface     = (*NoVendorInterface)(nil)
	_ RescueInterface     = (*NoRescueInterface)(nil)
	_ FirmwareInterface   = (*NoFirmwareInterface)(nil)
	_ InspectInterface    = (*NoInspectInterface)(nil)
	_ NetworkInterface    = NoopNetwork{}
	_ StorageInterface    = NoopStorage{}
	_ ManagementInterface = NoopManagement{}
	_ DeployInterface     = NoopDeploy{}
	_ StepProvider        = NoopDeploy{}
	_ StepRunner          = NoopDeploy{}
)
