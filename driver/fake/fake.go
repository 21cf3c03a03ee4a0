// Package fake implements every interface kind with a "fake"
// implementation (Name), for tests and for the fake-hardware hardware type
// (see builtin.Bundle): Power, Management, Boot, Deploy, Inspect, BIOS,
// RAID, Console, Vendor, Rescue, Firmware, Network and Storage, each made
// by its New function from a Config.
//
// A fake keeps its state in driver_internal_info (PowerStateKey and the
// other *Key constants), never in memory, so that it survives a restart of
// the process holding it, also behind a plugin. Tests inject delays and
// failures through Config, or per node through the driver_info keys
// DelayKey (fake_delay) and FailKey (fake_fail); an injected failure
// matches driver.ErrInjectedFailure. Benchmarks give nodes a simulated BMC
// with BMCLatencyKey (fake_bmc_latency), BMCAddressKey and
// BMCConcurrencyKey: power and management calls then queue for the BMC's
// slots and take its latency, inside whichever process serves the fake.
package fake

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/jsonmap"
	"github.com/anvilmetal/anvil/steps"
)

// Name is the implementation name every fake implementation registers
// under, for every kind.
const Name = "fake"

// driver_info keys every fake implementation reads, so that tests can
// inject delays and failures per node, also through a plugin process.
const (
	// DelayKey holds a Go duration ("250ms") every fake operation on
	// the node waits before acting (honouring cancellation).
	DelayKey = "fake_delay"
	// FailKey holds a comma-separated list of operations ("power.set_power_state",
	// "deploy.deploy", or "*" for all) that fail with driver.ErrInjectedFailure.
	FailKey = "fake_fail"
	// HealthKey holds the hardware health the fake BMC reports ("OK",
	// "Warning", "Critical"; absent: "OK"), so that tests can make a
	// node's health change as a real BMC's does.
	HealthKey = "fake_health"
)

// driver_internal_info keys the fake implementations keep their state in,
// so that it survives restarts of the process holding them.
const (
	PowerStateKey      = "fake_power_state"
	BootDeviceKey      = "fake_boot_device"
	BootPersistentKey  = "fake_boot_device_persistent"
	BootModeKey        = "fake_boot_mode"
	BootPreparedKey    = "fake_boot_prepared"
	DeployPreparedKey  = "fake_deploy_prepared"
	DeployedKey        = "fake_deployed"
	BIOSSettingsKey    = "fake_bios_settings"
	RAIDConfiguredKey  = "fake_raid_configured"
	ConsoleEnabledKey  = "fake_console_enabled"
	RescuedKey         = "fake_rescued"
	FirmwareVersionKey = "fake_firmware_version"
	NetworksKey        = "fake_networks"
	VolumesAttachedKey = "fake_volumes_attached"
	StepsPreparedKey   = "fake_steps_prepared"
	NMICountKey        = "fake_nmi_count"
	IndicatorKey       = "fake_indicator"
	SecureBootKey      = "fake_secure_boot"
	// SecureBootKeysResetKey records the management service step.
	SecureBootKeysResetKey  = "fake_secure_boot_keys_reset"
	VirtualMediaKey         = "fake_virtual_media"
	fakeDefaultFirmware     = "1.0.0"
	fakeDefaultBIOSBootMode = "Uefi"
)

// Config tunes the fake implementations for tests. The zero value is a
// fast, always-succeeding fake.
type Config struct {
	// Delays maps an operation ("power.get_power_state") or "*" to a wait
	// before the operation acts.
	Delays map[string]time.Duration
	// Failures maps an operation or "*" to the error it returns (wrapped
	// together with driver.ErrInjectedFailure).
	Failures map[string]error
	// Sleep waits d or until ctx is done; tests inject a fake clock here.
	// Nil means a real timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// InspectProperties are the properties fake inspection records; nil
	// means cpu_arch x86_64, 4 cpus, 8192 memory_mb, 100 local_gb.
	InspectProperties map[string]any
	// BMCs are the simulated BMCs the implementations' calls queue at
	// (see BMCLatencyKey); nil gives each implementation a set of its own.
	BMCs *BMCs
}

func fakeProperties() []driver.Property {
	return []driver.Property{
		{Name: DelayKey, Description: "Go duration every fake operation waits before acting (tests only). Optional."},
		{Name: FailKey, Description: `Comma-separated operations ("power.set_power_state", "*") that fail (tests only). Optional.`},
		{Name: BMCLatencyKey, Description: "Go duration (0 to 1m) every power and management call takes at the simulated BMC, e.g. 100ms IPMI-like, 20ms Redfish-like (benchmarks). Optional."},
		{Name: BMCAddressKey, Description: "Simulated BMC the node shares with the nodes naming the same address; default a BMC of its own. Optional."},
		{Name: BMCConcurrencyKey, Description: "Calls the simulated BMC serves at once, 1 to 64; default 1. Optional."},
	}
}

// fakeBase carries what every fake implementation shares.
type fakeBase struct {
	kind driver.Kind
	cfg  Config
}

func newBase(kind driver.Kind, cfg Config) fakeBase {
	if cfg.BMCs == nil {
		cfg.BMCs = NewBMCs()
	}
	return fakeBase{kind, cfg}
}

// Properties returns the optional fake_delay and fake_fail properties.
func (f *fakeBase) Properties() []driver.Property { return fakeProperties() }

// Validate checks that fake_delay, when set, is a duration, and the
// simulated BMC's keys (fake_bmc_latency, fake_bmc_address,
// fake_bmc_concurrency) are within their bounds.
func (f *fakeBase) Validate(ctx context.Context, t *driver.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s, ok := t.DriverInfoString(DelayKey); ok {
		if _, err := time.ParseDuration(s); err != nil {
			return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: f.kind, Impl: Name, Field: "driver_info", Key: DelayKey, Expected: "a Go duration such as 250ms"}
		}
	}
	if _, err := f.bmcSettingsOf(t); err != nil {
		return err
	}
	return f.begin(ctx, t, "validate")
}

// begin runs the configured delay and failure injection for op.
func (f *fakeBase) begin(ctx context.Context, t *driver.Task, op string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	full := string(f.kind) + "." + op
	d := f.cfg.Delays[full]
	if d == 0 {
		d = f.cfg.Delays["*"]
	}
	if s, ok := t.DriverInfoString(DelayKey); ok {
		if nd, err := time.ParseDuration(s); err == nil {
			d = nd
		}
	}
	if d > 0 {
		sleep := f.cfg.Sleep
		if sleep == nil {
			sleep = sleepCtx
		}
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
	if f.usesBMC(op) {
		if err := f.callBMC(ctx, t); err != nil {
			return err
		}
	}
	return f.fail(t, op)
}

func (f *fakeBase) fail(t *driver.Task, op string) error {
	full := string(f.kind) + "." + op
	if err, ok := f.cfg.Failures[full]; ok {
		return fmt.Errorf("%s/fake: %s on %s: %w: %w", f.kind, op, t, driver.ErrInjectedFailure, err)
	}
	if err, ok := f.cfg.Failures["*"]; ok && op != "validate" {
		return fmt.Errorf("%s/fake: %s on %s: %w: %w", f.kind, op, t, driver.ErrInjectedFailure, err)
	}
	if s, ok := t.DriverInfoString(FailKey); ok {
		for _, want := range strings.Split(s, ",") {
			want = strings.TrimSpace(want)
			if want == full || (want == "*" && op != "validate") {
				return fmt.Errorf("%s/fake: %s on %s: %w (driver_info %s)", f.kind, op, t, driver.ErrInjectedFailure, FailKey)
			}
		}
	}
	return nil
}

func (f *fakeBase) stepNotFound(kind steps.Kind, name string) error {
	return &driver.StepNotFoundError{Kind: f.kind, Impl: Name, StepKind: string(kind), Step: name}
}

// Power is the "fake" power implementation. The power state lives in
// driver_internal_info[PowerStateKey]; a node without it reads as the
// node's recorded power state, or off.
type Power struct{ fakeBase }

// NewPower returns the "fake" power implementation.
func NewPower(cfg Config) *Power { return &Power{newBase(driver.KindPower, cfg)} }

// GetPowerState returns the recorded state.
func (f *Power) GetPowerState(ctx context.Context, t *driver.Task) (driver.PowerState, error) {
	if err := f.begin(ctx, t, "get_power_state"); err != nil {
		return driver.PowerUnknown, err
	}
	return fakePowerState(t), nil
}

func fakePowerState(t *driver.Task) driver.PowerState {
	if s, ok := t.InternalString(PowerStateKey); ok {
		return driver.PowerState(s)
	}
	if t.PowerState == driver.PowerOn {
		return driver.PowerOn
	}
	return driver.PowerOff
}

// SetPowerState records the state target leads to.
func (f *Power) SetPowerState(ctx context.Context, t *driver.Task, target driver.PowerState, _ time.Duration) error {
	if err := f.begin(ctx, t, "set_power_state"); err != nil {
		return err
	}
	switch target {
	case driver.PowerOn, driver.Reboot, driver.SoftReboot:
		t.SetDriverInternalInfo(PowerStateKey, string(driver.PowerOn))
	case driver.PowerOff, driver.SoftPowerOff:
		t.SetDriverInternalInfo(PowerStateKey, string(driver.PowerOff))
	default:
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindPower, Impl: Name, Field: "target", Key: "power_state",
			Expected: fmt.Sprintf("one of %q, %q, %q, %q, %q, got %q", driver.PowerOn, driver.PowerOff, driver.Reboot, driver.SoftReboot, driver.SoftPowerOff, target)}
	}
	return nil
}

// Reboot leaves the node on.
func (f *Power) Reboot(ctx context.Context, t *driver.Task, _ time.Duration) error {
	if err := f.begin(ctx, t, "reboot"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(PowerStateKey, string(driver.PowerOn))
	return nil
}

// Management is the "fake" management implementation; the boot device
// and boot mode live in driver_internal_info.
type Management struct{ fakeBase }

// NewManagement returns the "fake" management implementation.
func NewManagement(cfg Config) *Management {
	return &Management{newBase(driver.KindManagement, cfg)}
}

var fakeBootDevices = []driver.BootDevice{driver.BootPXE, driver.BootDisk, driver.BootCDROM, driver.BootBIOS, driver.BootSafe}

// SupportedBootDevices returns pxe, disk, cdrom, bios and safe.
func (f *Management) SupportedBootDevices(ctx context.Context, t *driver.Task) ([]driver.BootDevice, error) {
	if err := f.begin(ctx, t, "get_supported_boot_devices"); err != nil {
		return nil, err
	}
	return slices.Clone(fakeBootDevices), nil
}

// SetBootDevice records device.
func (f *Management) SetBootDevice(ctx context.Context, t *driver.Task, device driver.BootDevice, persistent bool) error {
	if err := f.begin(ctx, t, "set_boot_device"); err != nil {
		return err
	}
	if !slices.Contains(fakeBootDevices, device) {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindManagement, Impl: Name, Field: "args", Key: "boot_device",
			Expected: fmt.Sprintf("one of %v, got %q", fakeBootDevices, device)}
	}
	t.SetDriverInternalInfo(BootDeviceKey, string(device))
	t.SetDriverInternalInfo(BootPersistentKey, persistent)
	return nil
}

// GetBootDevice returns the recorded device (pxe, not persistent, when
// none was set).
func (f *Management) GetBootDevice(ctx context.Context, t *driver.Task) (driver.BootDeviceState, error) {
	if err := f.begin(ctx, t, "get_boot_device"); err != nil {
		return driver.BootDeviceState{}, err
	}
	dev, ok := t.InternalString(BootDeviceKey)
	if !ok {
		dev = string(driver.BootPXE)
	}
	p, _ := t.DriverInternalInfo[BootPersistentKey].(bool)
	return driver.BootDeviceState{Device: driver.BootDevice(dev), Persistent: &p}, nil
}

// Steps returns the management service step
// reset_secure_boot_keys_to_default (as Redfish management has), which
// records that the keys were reset.
func (f *Management) Steps(kind steps.Kind) []steps.Step {
	if kind != steps.Service {
		return nil
	}
	return []steps.Step{{Interface: string(driver.KindManagement), Name: "reset_secure_boot_keys_to_default", Priority: 0, RequiresRamdisk: false}}
}

// ExecuteStep runs reset_secure_boot_keys_to_default.
func (f *Management) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, s steps.Step) (driver.StepResult, error) {
	if !driver.HasStep(f, kind, s.Name) {
		return driver.StepResult{}, f.stepNotFound(kind, s.Name)
	}
	if err := f.begin(ctx, t, s.Name); err != nil {
		return driver.StepResult{}, err
	}
	t.SetDriverInternalInfo(SecureBootKeysResetKey, true)
	return driver.StepResult{}, nil
}

// GetBootMode returns the recorded boot mode (uefi by default).
func (f *Management) GetBootMode(ctx context.Context, t *driver.Task) (driver.BootMode, error) {
	if err := f.begin(ctx, t, "get_boot_mode"); err != nil {
		return "", err
	}
	if m, ok := t.InternalString(BootModeKey); ok {
		return driver.BootMode(m), nil
	}
	return driver.BootModeUEFI, nil
}

// SetBootMode records mode.
func (f *Management) SetBootMode(ctx context.Context, t *driver.Task, mode driver.BootMode) error {
	if err := f.begin(ctx, t, "set_boot_mode"); err != nil {
		return err
	}
	if mode != driver.BootModeBIOS && mode != driver.BootModeUEFI {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindManagement, Impl: Name, Field: "args", Key: "boot_mode",
			Expected: fmt.Sprintf("%q or %q, got %q", driver.BootModeBIOS, driver.BootModeUEFI, mode)}
	}
	t.SetDriverInternalInfo(BootModeKey, string(mode))
	return nil
}

// InjectNMI counts the interrupts in driver_internal_info.
func (f *Management) InjectNMI(ctx context.Context, t *driver.Task) error {
	if err := f.begin(ctx, t, "inject_nmi"); err != nil {
		return err
	}
	n, _ := t.DriverInternalInfo[NMICountKey].(float64)
	if i, ok := t.DriverInternalInfo[NMICountKey].(int); ok {
		n = float64(i)
	}
	t.SetDriverInternalInfo(NMICountKey, n+1)
	return nil
}

// GetIndicatorState returns the recorded indicator state (off by default).
func (f *Management) GetIndicatorState(ctx context.Context, t *driver.Task) (driver.IndicatorState, error) {
	if err := f.begin(ctx, t, "get_indicator_state"); err != nil {
		return "", err
	}
	if s, ok := t.InternalString(IndicatorKey); ok {
		return driver.IndicatorState(s), nil
	}
	return driver.IndicatorOff, nil
}

// SetIndicatorState records state.
func (f *Management) SetIndicatorState(ctx context.Context, t *driver.Task, state driver.IndicatorState) error {
	if err := f.begin(ctx, t, "set_indicator_state"); err != nil {
		return err
	}
	if !state.Valid() {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindManagement, Impl: Name, Field: "args", Key: "state",
			Expected: fmt.Sprintf("%q, %q or %q, got %q", driver.IndicatorOn, driver.IndicatorOff, driver.IndicatorBlinking, state)}
	}
	t.SetDriverInternalInfo(IndicatorKey, string(state))
	return nil
}

// GetSecureBootState returns the recorded secure boot state (disabled by
// default).
func (f *Management) GetSecureBootState(ctx context.Context, t *driver.Task) (bool, error) {
	if err := f.begin(ctx, t, "get_secure_boot_state"); err != nil {
		return false, err
	}
	on, _ := t.DriverInternalInfo[SecureBootKey].(bool)
	return on, nil
}

// SetSecureBootState records enabled.
func (f *Management) SetSecureBootState(ctx context.Context, t *driver.Task, enabled bool) error {
	if err := f.begin(ctx, t, "set_secure_boot_state"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(SecureBootKey, enabled)
	return nil
}

// fakeVirtualMedia are the fake BMC's virtual media devices, in the
// order VirtualMedia lists them: each device type and the Redfish media
// types its device accepts.
var fakeVirtualMedia = []struct {
	device driver.VirtualMediaDevice
	types  []string
}{
	{driver.VirtualMediaCDROM, []string{"CD", "DVD"}},
	{driver.VirtualMediaDisk, []string{"USBStick"}},
	{driver.VirtualMediaFloppy, []string{"Floppy"}},
}

// insertedMedia returns the images recorded in driver_internal_info by device
// type (a copy).
func insertedMedia(t *driver.Task) map[string]any {
	m, _ := t.DriverInternalInfo[VirtualMediaKey].(map[string]any)
	return jsonmap.Clone(m)
}

// AttachVirtualMedia records imageURL as inserted in device, replacing
// what it held.
func (f *Management) AttachVirtualMedia(ctx context.Context, t *driver.Task, device driver.VirtualMediaDevice, imageURL string) error {
	if err := f.begin(ctx, t, "attach_virtual_media"); err != nil {
		return err
	}
	if !device.Valid() {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindManagement, Impl: Name, Field: "args", Key: "device_type",
			Expected: fmt.Sprintf("one of %v, got %q", driver.VirtualMediaDevices(), device)}
	}
	if imageURL == "" {
		return &driver.MissingParameterError{Node: t.NodeUUID, Kind: driver.KindManagement, Impl: Name, Field: "args", Missing: []string{"image_url"}}
	}
	m := insertedMedia(t)
	if m == nil {
		m = map[string]any{}
	}
	m[string(device)] = imageURL
	t.SetDriverInternalInfo(VirtualMediaKey, m)
	return nil
}

// DetachVirtualMedia forgets the images of devices, of every device when
// devices is empty.
func (f *Management) DetachVirtualMedia(ctx context.Context, t *driver.Task, devices []driver.VirtualMediaDevice) error {
	if err := f.begin(ctx, t, "detach_virtual_media"); err != nil {
		return err
	}
	for _, d := range devices {
		if !d.Valid() {
			return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindManagement, Impl: Name, Field: "args", Key: "device_types",
				Expected: fmt.Sprintf("each one of %v, got %q", driver.VirtualMediaDevices(), d)}
		}
	}
	m := insertedMedia(t)
	if len(devices) == 0 {
		m = nil
	}
	for _, d := range devices {
		delete(m, string(d))
	}
	if len(m) == 0 {
		t.DeleteDriverInternalInfo(VirtualMediaKey)
		return nil
	}
	t.SetDriverInternalInfo(VirtualMediaKey, m)
	return nil
}

// VirtualMedia lists the fake BMC's CD, USB stick and floppy devices with
// the images recorded in them.
func (f *Management) VirtualMedia(ctx context.Context, t *driver.Task) ([]driver.VirtualMedia, error) {
	if err := f.begin(ctx, t, "get_virtual_media"); err != nil {
		return nil, err
	}
	m := insertedMedia(t)
	out := make([]driver.VirtualMedia, 0, len(fakeVirtualMedia))
	for _, d := range fakeVirtualMedia {
		img, _ := m[string(d.device)].(string)
		out = append(out, driver.VirtualMedia{MediaTypes: slices.Clone(d.types), Inserted: img != "", Image: img})
	}
	return out, nil
}

// Sensors returns two fixed readings: a temperature and a fan.
func (f *Management) Sensors(ctx context.Context, t *driver.Task) ([]driver.SensorReading, error) {
	if err := f.begin(ctx, t, "get_sensors_data"); err != nil {
		return nil, err
	}
	temp, fan := 38.0, 4200.0
	return []driver.SensorReading{
		{Name: "CPU Temp", Type: driver.SensorTemperature, Value: &temp, Units: "degrees C", Reading: "38 degrees C", Status: "ok"},
		{Name: "Fan 1", Type: driver.SensorFan, Value: &fan, Units: "RPM", Reading: "4200 RPM", Status: "ok"},
	}, nil
}

// Health reports the health in driver_info fake_health (HealthKey), OK
// when absent. A value that is not one of Ironic's health states is an
// *driver.InvalidParameterError.
func (f *Management) Health(ctx context.Context, t *driver.Task) (driver.Health, error) {
	if err := f.begin(ctx, t, "get_node_health"); err != nil {
		return driver.HealthUnknown, err
	}
	s, ok := t.DriverInfoString(HealthKey)
	if !ok {
		return driver.HealthOK, nil
	}
	switch h := driver.Health(s); h {
	case driver.HealthOK, driver.HealthWarning, driver.HealthCritical:
		return h, nil
	}
	return driver.HealthUnknown, &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindManagement, Impl: Name, Field: "driver_info", Key: HealthKey,
		Expected: fmt.Sprintf("one of %q, %q, %q, got %q", driver.HealthOK, driver.HealthWarning, driver.HealthCritical, s)}
}

// BootRamdiskParamsKey is the driver_internal_info key holding the
// ramdisk parameters of the last Boot.PrepareRamdisk (absent when it
// got none), as a real boot interface puts them on the kernel command line.
const BootRamdiskParamsKey = "fake_boot_ramdisk_params"

// Boot is the "fake" boot implementation; it records what it prepared.
type Boot struct{ fakeBase }

// NewBoot returns the "fake" boot implementation.
func NewBoot(cfg Config) *Boot { return &Boot{newBase(driver.KindBoot, cfg)} }

// PrepareRamdisk records "ramdisk" and the ramdisk parameters, and sets a
// one-time network boot in the fake BMC's record (the keys Management
// reads), as a PXE-family boot interface sets the boot device itself: the
// conductor leaves the boot device to the boot interface.
func (f *Boot) PrepareRamdisk(ctx context.Context, t *driver.Task, params map[string]any) error {
	if err := f.begin(ctx, t, "prepare_ramdisk"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(BootDeviceKey, string(driver.BootPXE))
	t.SetDriverInternalInfo(BootPersistentKey, false)
	t.SetDriverInternalInfo(BootPreparedKey, "ramdisk")
	if len(params) > 0 {
		t.SetDriverInternalInfo(BootRamdiskParamsKey, jsonmap.Clone(params))
	} else {
		t.DeleteDriverInternalInfo(BootRamdiskParamsKey)
	}
	return nil
}

// CleanUpRamdisk forgets the ramdisk.
func (f *Boot) CleanUpRamdisk(ctx context.Context, t *driver.Task) error {
	if err := f.begin(ctx, t, "clean_up_ramdisk"); err != nil {
		return err
	}
	if v, _ := t.InternalString(BootPreparedKey); v == "ramdisk" {
		t.DeleteDriverInternalInfo(BootPreparedKey)
	}
	t.DeleteDriverInternalInfo(BootRamdiskParamsKey)
	return nil
}

// PrepareInstance records "instance".
func (f *Boot) PrepareInstance(ctx context.Context, t *driver.Task) error {
	if err := f.begin(ctx, t, "prepare_instance"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(BootPreparedKey, "instance")
	return nil
}

// CleanUpInstance forgets the instance boot.
func (f *Boot) CleanUpInstance(ctx context.Context, t *driver.Task) error {
	if err := f.begin(ctx, t, "clean_up_instance"); err != nil {
		return err
	}
	if v, _ := t.InternalString(BootPreparedKey); v == "instance" {
		t.DeleteDriverInternalInfo(BootPreparedKey)
	}
	return nil
}

// Deploy is the "fake" deploy implementation: deploying finishes at
// once and is recorded in driver_internal_info.
type Deploy struct{ fakeBase }

// NewDeploy returns the "fake" deploy implementation.
func NewDeploy(cfg Config) *Deploy { return &Deploy{newBase(driver.KindDeploy, cfg)} }

// Prepare records the preparation.
func (f *Deploy) Prepare(ctx context.Context, t *driver.Task) error {
	if err := f.begin(ctx, t, "prepare"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(DeployPreparedKey, true)
	return nil
}

// Deploy records the deployment and finishes at once.
func (f *Deploy) Deploy(ctx context.Context, t *driver.Task) (driver.StepResult, error) {
	if err := f.begin(ctx, t, "deploy"); err != nil {
		return driver.StepResult{}, err
	}
	t.SetDriverInternalInfo(DeployedKey, true)
	return driver.StepResult{}, nil
}

// TearDown removes the deployment and powers the node off.
func (f *Deploy) TearDown(ctx context.Context, t *driver.Task) error {
	if err := f.begin(ctx, t, "tear_down"); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(DeployedKey)
	t.SetDriverInternalInfo(PowerStateKey, string(driver.PowerOff))
	return nil
}

// CleanUp forgets the preparation.
func (f *Deploy) CleanUp(ctx context.Context, t *driver.Task) error {
	if err := f.begin(ctx, t, "clean_up"); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(DeployPreparedKey)
	return nil
}

// TakeOver does nothing beyond failure injection.
func (f *Deploy) TakeOver(ctx context.Context, t *driver.Task) error {
	return f.begin(ctx, t, "take_over")
}

// PrepareSteps records that the environment for kind is ready.
func (f *Deploy) PrepareSteps(ctx context.Context, t *driver.Task, kind steps.Kind) (driver.StepResult, error) {
	if err := f.begin(ctx, t, "prepare_"+string(kind)); err != nil {
		return driver.StepResult{}, err
	}
	t.SetDriverInternalInfo(StepsPreparedKey, string(kind))
	return driver.StepResult{}, nil
}

// TearDownSteps forgets the environment for kind.
func (f *Deploy) TearDownSteps(ctx context.Context, t *driver.Task, kind steps.Kind) error {
	if err := f.begin(ctx, t, "tear_down_"+string(kind)); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(StepsPreparedKey)
	return nil
}

// Steps returns the core deploy step.
func (f *Deploy) Steps(kind steps.Kind) []steps.Step {
	if kind == steps.Deploy {
		return []steps.Step{coreDeployStep()}
	}
	return nil
}

// ExecuteStep runs the core deploy step.
func (f *Deploy) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, s steps.Step) (driver.StepResult, error) {
	if kind == steps.Deploy && s.Name == "deploy" {
		return f.Deploy(ctx, t)
	}
	return driver.StepResult{}, f.stepNotFound(kind, s.Name)
}

// Inspect is the "fake" inspect implementation: it records fixed
// properties and one PXE port with a MAC derived from the node UUID.
type Inspect struct{ fakeBase }

// NewInspect returns the "fake" inspect implementation.
func NewInspect(cfg Config) *Inspect {
	return &Inspect{newBase(driver.KindInspect, cfg)}
}

// InspectHardware records properties and a port, and finishes at once.
func (f *Inspect) InspectHardware(ctx context.Context, t *driver.Task) (driver.StepResult, error) {
	if err := f.begin(ctx, t, "inspect_hardware"); err != nil {
		return driver.StepResult{}, err
	}
	props := f.cfg.InspectProperties
	if props == nil {
		props = map[string]any{"cpu_arch": "x86_64", "cpus": float64(4), "memory_mb": float64(8192), "local_gb": float64(100)}
	}
	for k, v := range props {
		t.SetProperty(k, jsonmap.CloneValue(v))
	}
	t.AddPort(driver.Port{Address: MAC(t.NodeUUID), PXEEnabled: true})
	return driver.StepResult{}, nil
}

// MAC returns the deterministic, locally administered MAC address fake
// inspection gives a node.
func MAC(nodeUUID string) string {
	h := sha256.Sum256([]byte(nodeUUID))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[0], h[1], h[2])
}

// BIOS is the "fake" bios implementation; settings live in
// driver_internal_info and change through the apply_configuration and
// factory_reset steps (clean and deploy, priority 0).
type BIOS struct{ fakeBase }

// NewBIOS returns the "fake" bios implementation.
func NewBIOS(cfg Config) *BIOS { return &BIOS{newBase(driver.KindBIOS, cfg)} }

func fakeDefaultBIOS() map[string]any {
	return map[string]any{"BootMode": fakeDefaultBIOSBootMode, "ProcVirtualization": "Enabled"}
}

// CacheBIOSSettings returns the recorded settings, sorted by name.
func (f *BIOS) CacheBIOSSettings(ctx context.Context, t *driver.Task) ([]driver.BIOSSetting, error) {
	if err := f.begin(ctx, t, "cache_bios_settings"); err != nil {
		return nil, err
	}
	m, ok := t.DriverInternalInfo[BIOSSettingsKey].(map[string]any)
	if !ok {
		m = fakeDefaultBIOS()
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]driver.BIOSSetting, 0, len(names))
	for _, n := range names {
		out = append(out, driver.BIOSSetting{Name: n, Value: fmt.Sprint(m[n]), AttributeType: "String"})
	}
	return out, nil
}

// Steps returns apply_configuration and factory_reset for clean, deploy
// and service.
func (f *BIOS) Steps(kind steps.Kind) []steps.Step {
	if kind != steps.Clean && kind != steps.Deploy && kind != steps.Service {
		return nil
	}
	return []steps.Step{
		{Interface: string(driver.KindBIOS), Name: "apply_configuration", Priority: 0, Abortable: kind == steps.Deploy,
			ArgsInfo: map[string]steps.ArgInfo{"settings": {Description: "A list of {name, value} settings to apply.", Required: true}}},
		{Interface: string(driver.KindBIOS), Name: "factory_reset", Priority: 0, Abortable: kind == steps.Deploy},
	}
}

// ExecuteStep runs apply_configuration or factory_reset.
func (f *BIOS) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, s steps.Step) (driver.StepResult, error) {
	if !driver.HasStep(f, kind, s.Name) {
		return driver.StepResult{}, f.stepNotFound(kind, s.Name)
	}
	if err := f.begin(ctx, t, s.Name); err != nil {
		return driver.StepResult{}, err
	}
	switch s.Name {
	case "factory_reset":
		t.SetDriverInternalInfo(BIOSSettingsKey, fakeDefaultBIOS())
	case "apply_configuration":
		list, ok := s.Args["settings"].([]any)
		if !ok {
			return driver.StepResult{}, &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindBIOS, Impl: Name, Field: "args", Key: "settings", Expected: "a list of {name, value} objects"}
		}
		cur, ok := t.DriverInternalInfo[BIOSSettingsKey].(map[string]any)
		if !ok {
			cur = fakeDefaultBIOS()
		} else {
			cur = jsonmap.Clone(cur)
		}
		for _, item := range list {
			m, ok := item.(map[string]any)
			name, _ := m["name"].(string)
			if !ok || name == "" {
				return driver.StepResult{}, &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindBIOS, Impl: Name, Field: "args", Key: "settings", Expected: "each item to have a non-empty name"}
			}
			cur[name] = fmt.Sprint(m["value"])
		}
		t.SetDriverInternalInfo(BIOSSettingsKey, cur)
	}
	return driver.StepResult{}, nil
}

// RAID is the "fake" raid implementation with create_configuration
// and delete_configuration steps (clean and deploy, priority 0).
type RAID struct{ fakeBase }

// NewRAID returns the "fake" raid implementation.
func NewRAID(cfg Config) *RAID { return &RAID{newBase(driver.KindRAID, cfg)} }

// ValidateRAIDConfig requires a non-empty logical_disks list.
func (f *RAID) ValidateRAIDConfig(ctx context.Context, t *driver.Task, config map[string]any) error {
	if err := f.begin(ctx, t, "validate_raid_config"); err != nil {
		return err
	}
	if disks, ok := config["logical_disks"].([]any); !ok || len(disks) == 0 {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindRAID, Impl: Name, Field: "target_raid_config", Key: "logical_disks", Expected: "a non-empty list"}
	}
	return nil
}

// Steps returns create_configuration and delete_configuration for
// clean, deploy and service.
func (f *RAID) Steps(kind steps.Kind) []steps.Step {
	if kind != steps.Clean && kind != steps.Deploy && kind != steps.Service {
		return nil
	}
	return []steps.Step{
		{Interface: string(driver.KindRAID), Name: "create_configuration", Priority: 0, Abortable: kind == steps.Deploy,
			ArgsInfo: map[string]steps.ArgInfo{
				"create_root_volume":     {Description: "Whether to create the root volume. Default true."},
				"create_nonroot_volumes": {Description: "Whether to create the non-root volumes. Default true."},
			}},
		{Interface: string(driver.KindRAID), Name: "delete_configuration", Priority: 0, Abortable: kind == steps.Deploy},
	}
}

// ExecuteStep runs create_configuration or delete_configuration.
func (f *RAID) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, s steps.Step) (driver.StepResult, error) {
	if !driver.HasStep(f, kind, s.Name) {
		return driver.StepResult{}, f.stepNotFound(kind, s.Name)
	}
	if err := f.begin(ctx, t, s.Name); err != nil {
		return driver.StepResult{}, err
	}
	if s.Name == "create_configuration" {
		t.SetDriverInternalInfo(RAIDConfiguredKey, true)
	} else {
		t.DeleteDriverInternalInfo(RAIDConfiguredKey)
	}
	return driver.StepResult{}, nil
}

// Console is the "fake" console implementation.
type Console struct{ fakeBase }

// NewConsole returns the "fake" console implementation.
func NewConsole(cfg Config) *Console {
	return &Console{newBase(driver.KindConsole, cfg)}
}

// StartConsole records the console as enabled.
func (f *Console) StartConsole(ctx context.Context, t *driver.Task) error {
	if err := f.begin(ctx, t, "start_console"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(ConsoleEnabledKey, true)
	return nil
}

// StopConsole records the console as disabled.
func (f *Console) StopConsole(ctx context.Context, t *driver.Task) error {
	if err := f.begin(ctx, t, "stop_console"); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(ConsoleEnabledKey)
	return nil
}

// ErrConsoleNotStarted is returned by the fake console's GetConsole for a
// console that was not started: a running console is what a real
// implementation reports on (its process and port), so a caller asking
// about a stopped one has lost track of it, and the fake says so rather
// than hand out an address nothing listens on.
var ErrConsoleNotStarted = errors.New("console/fake: the console is not started")

// GetConsole returns the fake:// URL of a started console; for a console
// not started it fails with ErrConsoleNotStarted.
func (f *Console) GetConsole(ctx context.Context, t *driver.Task) (driver.ConsoleInfo, error) {
	if err := f.begin(ctx, t, "get_console"); err != nil {
		return driver.ConsoleInfo{}, err
	}
	if on, _ := t.DriverInternalInfo[ConsoleEnabledKey].(bool); on {
		return driver.ConsoleInfo{Type: "fake", URL: "fake://console/" + t.NodeUUID}, nil
	}
	return driver.ConsoleInfo{}, fmt.Errorf("%w on %s", ErrConsoleNotStarted, t)
}

// Vendor is the "fake" vendor implementation with two passthru
// methods: first_method (POST, requires "bar", returns it) and echo (GET
// or POST, returns its arguments).
type Vendor struct{ fakeBase }

// NewVendor returns the "fake" vendor implementation.
func NewVendor(cfg Config) *Vendor { return &Vendor{newBase(driver.KindVendor, cfg)} }

// Methods returns first_method and echo.
func (f *Vendor) Methods() []driver.VendorMethod {
	return []driver.VendorMethod{
		{Name: "first_method", Description: "Returns its bar argument.", HTTPMethods: []string{"POST"},
			ArgsInfo: map[string]steps.ArgInfo{"bar": {Description: "Any value.", Required: true}}},
		{Name: "echo", Description: "Returns its arguments.", HTTPMethods: []string{"GET", "POST"}},
	}
}

// Call runs a passthru method.
func (f *Vendor) Call(ctx context.Context, t *driver.Task, method, httpMethod string, args map[string]any) (any, error) {
	var m *driver.VendorMethod
	for _, vm := range f.Methods() {
		if vm.Name == method {
			m = &vm
			break
		}
	}
	if m == nil {
		return nil, &driver.UnsupportedError{Kind: driver.KindVendor, Impl: Name, Operation: "vendor passthru " + method}
	}
	if !slices.Contains(m.HTTPMethods, httpMethod) {
		return nil, &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindVendor, Impl: Name, Field: "http_method", Key: method, Expected: fmt.Sprintf("one of %v, got %q", m.HTTPMethods, httpMethod)}
	}
	if err := f.begin(ctx, t, method); err != nil {
		return nil, err
	}
	switch method {
	case "first_method":
		bar, ok := args["bar"]
		if !ok {
			return nil, &driver.MissingParameterError{Node: t.NodeUUID, Kind: driver.KindVendor, Impl: Name, Field: "args", Missing: []string{"bar"}}
		}
		return map[string]any{"bar": bar}, nil
	default:
		return jsonmap.Clone(args), nil
	}
}

// Rescue is the "fake" rescue implementation.
type Rescue struct{ fakeBase }

// NewRescue returns the "fake" rescue implementation.
func NewRescue(cfg Config) *Rescue { return &Rescue{newBase(driver.KindRescue, cfg)} }

// Rescue records the node as rescued and finishes at once.
func (f *Rescue) Rescue(ctx context.Context, t *driver.Task) (driver.StepResult, error) {
	if err := f.begin(ctx, t, "rescue"); err != nil {
		return driver.StepResult{}, err
	}
	t.SetDriverInternalInfo(RescuedKey, true)
	return driver.StepResult{}, nil
}

// Unrescue records the node as no longer rescued.
func (f *Rescue) Unrescue(ctx context.Context, t *driver.Task) error {
	if err := f.begin(ctx, t, "unrescue"); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(RescuedKey)
	return nil
}

// CleanUp forgets the rescue.
func (f *Rescue) CleanUp(ctx context.Context, t *driver.Task) error {
	if err := f.begin(ctx, t, "clean_up"); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(RescuedKey)
	return nil
}

// Firmware is the "fake" firmware implementation with an update step
// (clean and service, priority 0).
type Firmware struct{ fakeBase }

// FakeBMCModel is the model the fake firmware interface gives its bmc
// component.
const FakeBMCModel = "Anvil fake BMC"

// NewFirmware returns the "fake" firmware implementation.
func NewFirmware(cfg Config) *Firmware {
	return &Firmware{newBase(driver.KindFirmware, cfg)}
}

// CacheFirmwareComponents returns the bios and bmc components; the bmc
// names its model (FakeBMCModel), as a Redfish BMC's Manager.Model does,
// the bios no identity, as in Ironic's redfish firmware interface.
func (f *Firmware) CacheFirmwareComponents(ctx context.Context, t *driver.Task) ([]driver.FirmwareComponent, error) {
	if err := f.begin(ctx, t, "cache_firmware_components"); err != nil {
		return nil, err
	}
	v, ok := t.InternalString(FirmwareVersionKey)
	if !ok {
		v = fakeDefaultFirmware
	}
	return []driver.FirmwareComponent{
		{Component: "bios", InitialVersion: fakeDefaultFirmware, CurrentVersion: v},
		{Component: "bmc", InitialVersion: fakeDefaultFirmware, CurrentVersion: v, Model: FakeBMCModel},
	}, nil
}

// Steps returns the update step for clean and service.
func (f *Firmware) Steps(kind steps.Kind) []steps.Step {
	if kind != steps.Clean && kind != steps.Service {
		return nil
	}
	return []steps.Step{{Interface: string(driver.KindFirmware), Name: "update", Priority: 0,
		ArgsInfo: map[string]steps.ArgInfo{"settings": {Description: "A list of {component, url} updates; the fake records the last url as the version.", Required: true}}}}
}

// ExecuteStep runs update: the version becomes the last settings item's url.
func (f *Firmware) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, s steps.Step) (driver.StepResult, error) {
	if !driver.HasStep(f, kind, s.Name) {
		return driver.StepResult{}, f.stepNotFound(kind, s.Name)
	}
	if err := f.begin(ctx, t, s.Name); err != nil {
		return driver.StepResult{}, err
	}
	list, ok := s.Args["settings"].([]any)
	if !ok || len(list) == 0 {
		return driver.StepResult{}, &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindFirmware, Impl: Name, Field: "args", Key: "settings", Expected: "a non-empty list of {component, url} objects"}
	}
	last, _ := list[len(list)-1].(map[string]any)
	url, _ := last["url"].(string)
	if url == "" {
		return driver.StepResult{}, &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindFirmware, Impl: Name, Field: "args", Key: "settings", Expected: "each item to have a url"}
	}
	t.SetDriverInternalInfo(FirmwareVersionKey, url)
	return driver.StepResult{}, nil
}

// Network is the "fake" network implementation; it records the
// networks a node is attached to.
type Network struct{ fakeBase }

// NewNetwork returns the "fake" network implementation.
func NewNetwork(cfg Config) *Network {
	return &Network{newBase(driver.KindNetwork, cfg)}
}

// AddNetwork records purpose.
func (f *Network) AddNetwork(ctx context.Context, t *driver.Task, purpose driver.NetworkPurpose) error {
	if err := f.begin(ctx, t, "add_"+string(purpose)+"_network"); err != nil {
		return err
	}
	nets := fakeNetworks(t)
	if !slices.Contains(nets, string(purpose)) {
		nets = append(nets, string(purpose))
	}
	t.SetDriverInternalInfo(NetworksKey, toAnySlice(nets))
	return nil
}

// RemoveNetwork forgets purpose.
func (f *Network) RemoveNetwork(ctx context.Context, t *driver.Task, purpose driver.NetworkPurpose) error {
	if err := f.begin(ctx, t, "remove_"+string(purpose)+"_network"); err != nil {
		return err
	}
	nets := slices.DeleteFunc(fakeNetworks(t), func(s string) bool { return s == string(purpose) })
	t.SetDriverInternalInfo(NetworksKey, toAnySlice(nets))
	return nil
}

func fakeNetworks(t *driver.Task) []string {
	var out []string
	list, _ := t.DriverInternalInfo[NetworksKey].([]any)
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func toAnySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Storage is the "fake" storage implementation.
type Storage struct{ fakeBase }

// NewStorage returns the "fake" storage implementation.
func NewStorage(cfg Config) *Storage {
	return &Storage{newBase(driver.KindStorage, cfg)}
}

// AttachVolumes records the volumes as attached.
func (f *Storage) AttachVolumes(ctx context.Context, t *driver.Task) error {
	if err := f.begin(ctx, t, "attach_volumes"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(VolumesAttachedKey, true)
	return nil
}

// DetachVolumes records the volumes as detached.
func (f *Storage) DetachVolumes(ctx context.Context, t *driver.Task) error {
	if err := f.begin(ctx, t, "detach_volumes"); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(VolumesAttachedKey)
	return nil
}

// ShouldWriteImage returns true.
func (f *Storage) ShouldWriteImage(ctx context.Context, t *driver.Task) (bool, error) {
	if err := f.begin(ctx, t, "should_write_image"); err != nil {
		return false, err
	}
	return true, nil
}

// Interface guards.
var (
	_ driver.PowerInterface      = (*Power)(nil)
	_ driver.ManagementInterface = (*Management)(nil)
	_ driver.NMIInjector         = (*Management)(nil)
	_ driver.IndicatorManager    = (*Management)(nil)
	_ driver.SecureBootManager   = (*Management)(nil)
	_ driver.SensorReader        = (*Management)(nil)
	_ driver.HealthReader        = (*Management)(nil)
	_ driver.VirtualMediaManager = (*Management)(nil)
	_ driver.BootModeManager     = (*Management)(nil)
	_ driver.StepRunner          = (*Management)(nil)
	_ driver.BootInterface       = (*Boot)(nil)
	_ driver.DeployInterface     = (*Deploy)(nil)
	_ driver.StepPreparer        = (*Deploy)(nil)
	_ driver.StepProvider        = (*Deploy)(nil)
	_ driver.StepRunner          = (*Deploy)(nil)
	_ driver.InspectInterface    = (*Inspect)(nil)
	_ driver.BIOSInterface       = (*BIOS)(nil)
	_ driver.StepRunner          = (*BIOS)(nil)
	_ driver.RAIDInterface       = (*RAID)(nil)
	_ driver.StepRunner          = (*RAID)(nil)
	_ driver.ConsoleInterface    = (*Console)(nil)
	_ driver.VendorInterface     = (*Vendor)(nil)
	_ driver.RescueInterface     = (*Rescue)(nil)
	_ driver.FirmwareInterface   = (*Firmware)(nil)
	_ driver.StepRunner          = (*Firmware)(nil)
	_ driver.NetworkInterface    = (*Network)(nil)
	_ driver.StorageInterface    = (*Storage)(nil)
)

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

// coreDeployStep is the deploy.deploy step every deploy interface has
// (Ironic's DeployInterface.deploy, decorated with priority 100).
func coreDeployStep() steps.Step {
	return steps.Step{Interface: string(driver.KindDeploy), Name: "deploy", Priority: 100, Abortable: true}
}
