package driver

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/steps"
)

// driver_info keys every fake implementation reads, so that tests can
// inject delays and failures per node, also through a plugin process.
const (
	// FakeDelayKey holds a Go duration ("250ms") every fake operation on
	// the node waits before acting (honouring cancellation).
	FakeDelayKey = "fake_delay"
	// FakeFailKey holds a comma-separated list of operations ("power.set_power_state",
	// "deploy.deploy", or "*" for all) that fail with ErrInjectedFailure.
	FakeFailKey = "fake_fail"
)

// driver_internal_info keys the fake implementations keep their state in,
// so that it survives restarts of the process holding them.
const (
	FakePowerStateKey       = "fake_power_state"
	FakeBootDeviceKey       = "fake_boot_device"
	FakeBootPersistentKey   = "fake_boot_device_persistent"
	FakeBootModeKey         = "fake_boot_mode"
	FakeBootPreparedKey     = "fake_boot_prepared"
	FakeDeployPreparedKey   = "fake_deploy_prepared"
	FakeDeployedKey         = "fake_deployed"
	FakeBIOSSettingsKey     = "fake_bios_settings"
	FakeRAIDConfiguredKey   = "fake_raid_configured"
	FakeConsoleEnabledKey   = "fake_console_enabled"
	FakeRescuedKey          = "fake_rescued"
	FakeFirmwareVersionKey  = "fake_firmware_version"
	FakeNetworksKey         = "fake_networks"
	FakeVolumesAttachedKey  = "fake_volumes_attached"
	FakeStepsPreparedKey    = "fake_steps_prepared"
	FakeNMICountKey         = "fake_nmi_count"
	FakeIndicatorKey        = "fake_indicator"
	FakeSecureBootKey       = "fake_secure_boot"
	fakeDefaultFirmware     = "1.0.0"
	fakeDefaultBIOSBootMode = "Uefi"
)

// FakeConfig tunes the fake implementations for tests. The zero value is a
// fast, always-succeeding fake.
type FakeConfig struct {
	// Delays maps an operation ("power.get_power_state") or "*" to a wait
	// before the operation acts.
	Delays map[string]time.Duration
	// Failures maps an operation or "*" to the error it returns (wrapped
	// together with ErrInjectedFailure).
	Failures map[string]error
	// Sleep waits d or until ctx is done; tests inject a fake clock here.
	// Nil means a real timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// InspectProperties are the properties fake inspection records; nil
	// means cpu_arch x86_64, 4 cpus, 8192 memory_mb, 100 local_gb.
	InspectProperties map[string]any
}

func fakeProperties() []Property {
	return []Property{
		{Name: FakeDelayKey, Description: "Go duration every fake operation waits before acting (tests only). Optional."},
		{Name: FakeFailKey, Description: `Comma-separated operations ("power.set_power_state", "*") that fail (tests only). Optional.`},
	}
}

// fakeBase carries what every fake implementation shares.
type fakeBase struct {
	kind Kind
	cfg  FakeConfig
}

// Properties returns the optional fake_delay and fake_fail properties.
func (f *fakeBase) Properties() []Property { return fakeProperties() }

// Validate checks that fake_delay, when set, is a duration.
func (f *fakeBase) Validate(ctx context.Context, t *Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s, ok := t.DriverInfoString(FakeDelayKey); ok {
		if _, err := time.ParseDuration(s); err != nil {
			return &InvalidParameterError{Node: t.NodeUUID, Kind: f.kind, Impl: Fake, Field: "driver_info", Key: FakeDelayKey, Expected: "a Go duration such as 250ms"}
		}
	}
	return f.begin(ctx, t, "validate")
}

// begin runs the configured delay and failure injection for op.
func (f *fakeBase) begin(ctx context.Context, t *Task, op string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	full := string(f.kind) + "." + op
	d := f.cfg.Delays[full]
	if d == 0 {
		d = f.cfg.Delays["*"]
	}
	if s, ok := t.DriverInfoString(FakeDelayKey); ok {
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
	return f.fail(t, op)
}

func (f *fakeBase) fail(t *Task, op string) error {
	full := string(f.kind) + "." + op
	if err, ok := f.cfg.Failures[full]; ok {
		return fmt.Errorf("%s/fake: %s on %s: %w: %w", f.kind, op, t, ErrInjectedFailure, err)
	}
	if err, ok := f.cfg.Failures["*"]; ok && op != "validate" {
		return fmt.Errorf("%s/fake: %s on %s: %w: %w", f.kind, op, t, ErrInjectedFailure, err)
	}
	if s, ok := t.DriverInfoString(FakeFailKey); ok {
		for _, want := range strings.Split(s, ",") {
			want = strings.TrimSpace(want)
			if want == full || (want == "*" && op != "validate") {
				return fmt.Errorf("%s/fake: %s on %s: %w (driver_info %s)", f.kind, op, t, ErrInjectedFailure, FakeFailKey)
			}
		}
	}
	return nil
}

func (f *fakeBase) stepNotFound(kind steps.Kind, name string) error {
	return &StepNotFoundError{Kind: f.kind, Impl: Fake, StepKind: string(kind), Step: name}
}

// FakePower is the "fake" power implementation. The power state lives in
// driver_internal_info[FakePowerStateKey]; a node without it reads as the
// node's recorded power state, or off.
type FakePower struct{ fakeBase }

// NewFakePower returns the "fake" power implementation.
func NewFakePower(cfg FakeConfig) *FakePower { return &FakePower{fakeBase{KindPower, cfg}} }

// GetPowerState returns the recorded state.
func (f *FakePower) GetPowerState(ctx context.Context, t *Task) (PowerState, error) {
	if err := f.begin(ctx, t, "get_power_state"); err != nil {
		return PowerUnknown, err
	}
	return fakePowerState(t), nil
}

func fakePowerState(t *Task) PowerState {
	if s, ok := t.InternalString(FakePowerStateKey); ok {
		return PowerState(s)
	}
	if t.PowerState == PowerOn {
		return PowerOn
	}
	return PowerOff
}

// SetPowerState records the state target leads to.
func (f *FakePower) SetPowerState(ctx context.Context, t *Task, target PowerState, _ time.Duration) error {
	if err := f.begin(ctx, t, "set_power_state"); err != nil {
		return err
	}
	switch target {
	case PowerOn, Reboot, SoftReboot:
		t.SetDriverInternalInfo(FakePowerStateKey, string(PowerOn))
	case PowerOff, SoftPowerOff:
		t.SetDriverInternalInfo(FakePowerStateKey, string(PowerOff))
	default:
		return &InvalidParameterError{Node: t.NodeUUID, Kind: KindPower, Impl: Fake, Field: "target", Key: "power_state",
			Expected: fmt.Sprintf("one of %q, %q, %q, %q, %q, got %q", PowerOn, PowerOff, Reboot, SoftReboot, SoftPowerOff, target)}
	}
	return nil
}

// Reboot leaves the node on.
func (f *FakePower) Reboot(ctx context.Context, t *Task, _ time.Duration) error {
	if err := f.begin(ctx, t, "reboot"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(FakePowerStateKey, string(PowerOn))
	return nil
}

// FakeManagement is the "fake" management implementation; the boot device
// and boot mode live in driver_internal_info.
type FakeManagement struct{ fakeBase }

// NewFakeManagement returns the "fake" management implementation.
func NewFakeManagement(cfg FakeConfig) *FakeManagement {
	return &FakeManagement{fakeBase{KindManagement, cfg}}
}

var fakeBootDevices = []BootDevice{BootPXE, BootDisk, BootCDROM, BootBIOS, BootSafe}

// SupportedBootDevices returns pxe, disk, cdrom, bios and safe.
func (f *FakeManagement) SupportedBootDevices(ctx context.Context, t *Task) ([]BootDevice, error) {
	if err := f.begin(ctx, t, "get_supported_boot_devices"); err != nil {
		return nil, err
	}
	return slices.Clone(fakeBootDevices), nil
}

// SetBootDevice records device.
func (f *FakeManagement) SetBootDevice(ctx context.Context, t *Task, device BootDevice, persistent bool) error {
	if err := f.begin(ctx, t, "set_boot_device"); err != nil {
		return err
	}
	if !slices.Contains(fakeBootDevices, device) {
		return &InvalidParameterError{Node: t.NodeUUID, Kind: KindManagement, Impl: Fake, Field: "args", Key: "boot_device",
			Expected: fmt.Sprintf("one of %v, got %q", fakeBootDevices, device)}
	}
	t.SetDriverInternalInfo(FakeBootDeviceKey, string(device))
	t.SetDriverInternalInfo(FakeBootPersistentKey, persistent)
	return nil
}

// GetBootDevice returns the recorded device (pxe, not persistent, when
// none was set).
func (f *FakeManagement) GetBootDevice(ctx context.Context, t *Task) (BootDeviceState, error) {
	if err := f.begin(ctx, t, "get_boot_device"); err != nil {
		return BootDeviceState{}, err
	}
	dev, ok := t.InternalString(FakeBootDeviceKey)
	if !ok {
		dev = string(BootPXE)
	}
	p, _ := t.DriverInternalInfo[FakeBootPersistentKey].(bool)
	return BootDeviceState{Device: BootDevice(dev), Persistent: &p}, nil
}

// GetBootMode returns the recorded boot mode (uefi by default).
func (f *FakeManagement) GetBootMode(ctx context.Context, t *Task) (BootMode, error) {
	if err := f.begin(ctx, t, "get_boot_mode"); err != nil {
		return "", err
	}
	if m, ok := t.InternalString(FakeBootModeKey); ok {
		return BootMode(m), nil
	}
	return BootModeUEFI, nil
}

// SetBootMode records mode.
func (f *FakeManagement) SetBootMode(ctx context.Context, t *Task, mode BootMode) error {
	if err := f.begin(ctx, t, "set_boot_mode"); err != nil {
		return err
	}
	if mode != BootModeBIOS && mode != BootModeUEFI {
		return &InvalidParameterError{Node: t.NodeUUID, Kind: KindManagement, Impl: Fake, Field: "args", Key: "boot_mode",
			Expected: fmt.Sprintf("%q or %q, got %q", BootModeBIOS, BootModeUEFI, mode)}
	}
	t.SetDriverInternalInfo(FakeBootModeKey, string(mode))
	return nil
}

// InjectNMI counts the interrupts in driver_internal_info.
func (f *FakeManagement) InjectNMI(ctx context.Context, t *Task) error {
	if err := f.begin(ctx, t, "inject_nmi"); err != nil {
		return err
	}
	n, _ := t.DriverInternalInfo[FakeNMICountKey].(float64)
	if i, ok := t.DriverInternalInfo[FakeNMICountKey].(int); ok {
		n = float64(i)
	}
	t.SetDriverInternalInfo(FakeNMICountKey, n+1)
	return nil
}

// GetIndicatorState returns the recorded indicator state (off by default).
func (f *FakeManagement) GetIndicatorState(ctx context.Context, t *Task) (IndicatorState, error) {
	if err := f.begin(ctx, t, "get_indicator_state"); err != nil {
		return "", err
	}
	if s, ok := t.InternalString(FakeIndicatorKey); ok {
		return IndicatorState(s), nil
	}
	return IndicatorOff, nil
}

// SetIndicatorState records state.
func (f *FakeManagement) SetIndicatorState(ctx context.Context, t *Task, state IndicatorState) error {
	if err := f.begin(ctx, t, "set_indicator_state"); err != nil {
		return err
	}
	if !state.Valid() {
		return &InvalidParameterError{Node: t.NodeUUID, Kind: KindManagement, Impl: Fake, Field: "args", Key: "state",
			Expected: fmt.Sprintf("%q, %q or %q, got %q", IndicatorOn, IndicatorOff, IndicatorBlinking, state)}
	}
	t.SetDriverInternalInfo(FakeIndicatorKey, string(state))
	return nil
}

// GetSecureBootState returns the recorded secure boot state (disabled by
// default).
func (f *FakeManagement) GetSecureBootState(ctx context.Context, t *Task) (bool, error) {
	if err := f.begin(ctx, t, "get_secure_boot_state"); err != nil {
		return false, err
	}
	on, _ := t.DriverInternalInfo[FakeSecureBootKey].(bool)
	return on, nil
}

// SetSecureBootState records enabled.
func (f *FakeManagement) SetSecureBootState(ctx context.Context, t *Task, enabled bool) error {
	if err := f.begin(ctx, t, "set_secure_boot_state"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(FakeSecureBootKey, enabled)
	return nil
}

// Sensors returns two fixed readings: a temperature and a fan.
func (f *FakeManagement) Sensors(ctx context.Context, t *Task) ([]SensorReading, error) {
	if err := f.begin(ctx, t, "get_sensors_data"); err != nil {
		return nil, err
	}
	temp, fan := 38.0, 4200.0
	return []SensorReading{
		{Name: "CPU Temp", Type: SensorTemperature, Value: &temp, Units: "degrees C", Reading: "38 degrees C", Status: "ok"},
		{Name: "Fan 1", Type: SensorFan, Value: &fan, Units: "RPM", Reading: "4200 RPM", Status: "ok"},
	}, nil
}

// FakeBootRamdiskParamsKey is the driver_internal_info key holding the
// ramdisk parameters of the last FakeBoot.PrepareRamdisk (absent when it
// got none), as a real boot interface puts them on the kernel command line.
const FakeBootRamdiskParamsKey = "fake_boot_ramdisk_params"

// FakeBoot is the "fake" boot implementation; it records what it prepared.
type FakeBoot struct{ fakeBase }

// NewFakeBoot returns the "fake" boot implementation.
func NewFakeBoot(cfg FakeConfig) *FakeBoot { return &FakeBoot{fakeBase{KindBoot, cfg}} }

// PrepareRamdisk records "ramdisk" and the ramdisk parameters, and sets a
// one-time network boot in the fake BMC's record (the keys FakeManagement
// reads), as a PXE-family boot interface sets the boot device itself: the
// conductor leaves the boot device to the boot interface.
func (f *FakeBoot) PrepareRamdisk(ctx context.Context, t *Task, params map[string]any) error {
	if err := f.begin(ctx, t, "prepare_ramdisk"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(FakeBootDeviceKey, string(BootPXE))
	t.SetDriverInternalInfo(FakeBootPersistentKey, false)
	t.SetDriverInternalInfo(FakeBootPreparedKey, "ramdisk")
	if len(params) > 0 {
		t.SetDriverInternalInfo(FakeBootRamdiskParamsKey, cloneMap(params))
	} else {
		t.DeleteDriverInternalInfo(FakeBootRamdiskParamsKey)
	}
	return nil
}

// CleanUpRamdisk forgets the ramdisk.
func (f *FakeBoot) CleanUpRamdisk(ctx context.Context, t *Task) error {
	if err := f.begin(ctx, t, "clean_up_ramdisk"); err != nil {
		return err
	}
	if v, _ := t.InternalString(FakeBootPreparedKey); v == "ramdisk" {
		t.DeleteDriverInternalInfo(FakeBootPreparedKey)
	}
	t.DeleteDriverInternalInfo(FakeBootRamdiskParamsKey)
	return nil
}

// PrepareInstance records "instance".
func (f *FakeBoot) PrepareInstance(ctx context.Context, t *Task) error {
	if err := f.begin(ctx, t, "prepare_instance"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(FakeBootPreparedKey, "instance")
	return nil
}

// CleanUpInstance forgets the instance boot.
func (f *FakeBoot) CleanUpInstance(ctx context.Context, t *Task) error {
	if err := f.begin(ctx, t, "clean_up_instance"); err != nil {
		return err
	}
	if v, _ := t.InternalString(FakeBootPreparedKey); v == "instance" {
		t.DeleteDriverInternalInfo(FakeBootPreparedKey)
	}
	return nil
}

// FakeDeploy is the "fake" deploy implementation: deploying finishes at
// once and is recorded in driver_internal_info.
type FakeDeploy struct{ fakeBase }

// NewFakeDeploy returns the "fake" deploy implementation.
func NewFakeDeploy(cfg FakeConfig) *FakeDeploy { return &FakeDeploy{fakeBase{KindDeploy, cfg}} }

// Prepare records the preparation.
func (f *FakeDeploy) Prepare(ctx context.Context, t *Task) error {
	if err := f.begin(ctx, t, "prepare"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(FakeDeployPreparedKey, true)
	return nil
}

// Deploy records the deployment and finishes at once.
func (f *FakeDeploy) Deploy(ctx context.Context, t *Task) (StepResult, error) {
	if err := f.begin(ctx, t, "deploy"); err != nil {
		return StepResult{}, err
	}
	t.SetDriverInternalInfo(FakeDeployedKey, true)
	return StepResult{}, nil
}

// TearDown removes the deployment and powers the node off.
func (f *FakeDeploy) TearDown(ctx context.Context, t *Task) error {
	if err := f.begin(ctx, t, "tear_down"); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(FakeDeployedKey)
	t.SetDriverInternalInfo(FakePowerStateKey, string(PowerOff))
	return nil
}

// CleanUp forgets the preparation.
func (f *FakeDeploy) CleanUp(ctx context.Context, t *Task) error {
	if err := f.begin(ctx, t, "clean_up"); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(FakeDeployPreparedKey)
	return nil
}

// TakeOver does nothing beyond failure injection.
func (f *FakeDeploy) TakeOver(ctx context.Context, t *Task) error {
	return f.begin(ctx, t, "take_over")
}

// PrepareSteps records that the environment for kind is ready.
func (f *FakeDeploy) PrepareSteps(ctx context.Context, t *Task, kind steps.Kind) (StepResult, error) {
	if err := f.begin(ctx, t, "prepare_"+string(kind)); err != nil {
		return StepResult{}, err
	}
	t.SetDriverInternalInfo(FakeStepsPreparedKey, string(kind))
	return StepResult{}, nil
}

// TearDownSteps forgets the environment for kind.
func (f *FakeDeploy) TearDownSteps(ctx context.Context, t *Task, kind steps.Kind) error {
	if err := f.begin(ctx, t, "tear_down_"+string(kind)); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(FakeStepsPreparedKey)
	return nil
}

// Steps returns the core deploy step.
func (f *FakeDeploy) Steps(kind steps.Kind) []steps.Step {
	if kind == steps.Deploy {
		return []steps.Step{coreDeployStep()}
	}
	return nil
}

// ExecuteStep runs the core deploy step.
func (f *FakeDeploy) ExecuteStep(ctx context.Context, t *Task, kind steps.Kind, s steps.Step) (StepResult, error) {
	if kind == steps.Deploy && s.Name == "deploy" {
		return f.Deploy(ctx, t)
	}
	return StepResult{}, f.stepNotFound(kind, s.Name)
}

// FakeInspect is the "fake" inspect implementation: it records fixed
// properties and one PXE port with a MAC derived from the node UUID.
type FakeInspect struct{ fakeBase }

// NewFakeInspect returns the "fake" inspect implementation.
func NewFakeInspect(cfg FakeConfig) *FakeInspect { return &FakeInspect{fakeBase{KindInspect, cfg}} }

// InspectHardware records properties and a port, and finishes at once.
func (f *FakeInspect) InspectHardware(ctx context.Context, t *Task) (StepResult, error) {
	if err := f.begin(ctx, t, "inspect_hardware"); err != nil {
		return StepResult{}, err
	}
	props := f.cfg.InspectProperties
	if props == nil {
		props = map[string]any{"cpu_arch": "x86_64", "cpus": float64(4), "memory_mb": float64(8192), "local_gb": float64(100)}
	}
	for k, v := range props {
		t.SetProperty(k, cloneValue(v))
	}
	t.AddPort(Port{Address: FakeMAC(t.NodeUUID), PXEEnabled: true})
	return StepResult{}, nil
}

// FakeMAC returns the deterministic, locally administered MAC address fake
// inspection gives a node.
func FakeMAC(nodeUUID string) string {
	h := sha256.Sum256([]byte(nodeUUID))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[0], h[1], h[2])
}

// FakeBIOS is the "fake" bios implementation; settings live in
// driver_internal_info and change through the apply_configuration and
// factory_reset steps (clean and deploy, priority 0).
type FakeBIOS struct{ fakeBase }

// NewFakeBIOS returns the "fake" bios implementation.
func NewFakeBIOS(cfg FakeConfig) *FakeBIOS { return &FakeBIOS{fakeBase{KindBIOS, cfg}} }

func fakeDefaultBIOS() map[string]any {
	return map[string]any{"BootMode": fakeDefaultBIOSBootMode, "ProcVirtualization": "Enabled"}
}

// CacheBIOSSettings returns the recorded settings, sorted by name.
func (f *FakeBIOS) CacheBIOSSettings(ctx context.Context, t *Task) ([]BIOSSetting, error) {
	if err := f.begin(ctx, t, "cache_bios_settings"); err != nil {
		return nil, err
	}
	m, ok := t.DriverInternalInfo[FakeBIOSSettingsKey].(map[string]any)
	if !ok {
		m = fakeDefaultBIOS()
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]BIOSSetting, 0, len(names))
	for _, n := range names {
		out = append(out, BIOSSetting{Name: n, Value: fmt.Sprint(m[n]), AttributeType: "String"})
	}
	return out, nil
}

// Steps returns apply_configuration and factory_reset for clean and deploy.
func (f *FakeBIOS) Steps(kind steps.Kind) []steps.Step {
	if kind != steps.Clean && kind != steps.Deploy {
		return nil
	}
	return []steps.Step{
		{Interface: string(KindBIOS), Name: "apply_configuration", Priority: 0, Abortable: kind == steps.Deploy,
			ArgsInfo: map[string]steps.ArgInfo{"settings": {Description: "A list of {name, value} settings to apply.", Required: true}}},
		{Interface: string(KindBIOS), Name: "factory_reset", Priority: 0, Abortable: kind == steps.Deploy},
	}
}

// ExecuteStep runs apply_configuration or factory_reset.
func (f *FakeBIOS) ExecuteStep(ctx context.Context, t *Task, kind steps.Kind, s steps.Step) (StepResult, error) {
	if !HasStep(f, kind, s.Name) {
		return StepResult{}, f.stepNotFound(kind, s.Name)
	}
	if err := f.begin(ctx, t, s.Name); err != nil {
		return StepResult{}, err
	}
	switch s.Name {
	case "factory_reset":
		t.SetDriverInternalInfo(FakeBIOSSettingsKey, fakeDefaultBIOS())
	case "apply_configuration":
		list, ok := s.Args["settings"].([]any)
		if !ok {
			return StepResult{}, &InvalidParameterError{Node: t.NodeUUID, Kind: KindBIOS, Impl: Fake, Field: "args", Key: "settings", Expected: "a list of {name, value} objects"}
		}
		cur, ok := t.DriverInternalInfo[FakeBIOSSettingsKey].(map[string]any)
		if !ok {
			cur = fakeDefaultBIOS()
		} else {
			cur = cloneMap(cur)
		}
		for _, item := range list {
			m, ok := item.(map[string]any)
			name, _ := m["name"].(string)
			if !ok || name == "" {
				return StepResult{}, &InvalidParameterError{Node: t.NodeUUID, Kind: KindBIOS, Impl: Fake, Field: "args", Key: "settings", Expected: "each item to have a non-empty name"}
			}
			cur[name] = fmt.Sprint(m["value"])
		}
		t.SetDriverInternalInfo(FakeBIOSSettingsKey, cur)
	}
	return StepResult{}, nil
}

// FakeRAID is the "fake" raid implementation with create_configuration
// and delete_configuration steps (clean and deploy, priority 0).
type FakeRAID struct{ fakeBase }

// NewFakeRAID returns the "fake" raid implementation.
func NewFakeRAID(cfg FakeConfig) *FakeRAID { return &FakeRAID{fakeBase{KindRAID, cfg}} }

// ValidateRAIDConfig requires a non-empty logical_disks list.
func (f *FakeRAID) ValidateRAIDConfig(ctx context.Context, t *Task, config map[string]any) error {
	if err := f.begin(ctx, t, "validate_raid_config"); err != nil {
		return err
	}
	if disks, ok := config["logical_disks"].([]any); !ok || len(disks) == 0 {
		return &InvalidParameterError{Node: t.NodeUUID, Kind: KindRAID, Impl: Fake, Field: "target_raid_config", Key: "logical_disks", Expected: "a non-empty list"}
	}
	return nil
}

// Steps returns create_configuration and delete_configuration.
func (f *FakeRAID) Steps(kind steps.Kind) []steps.Step {
	if kind != steps.Clean && kind != steps.Deploy {
		return nil
	}
	return []steps.Step{
		{Interface: string(KindRAID), Name: "create_configuration", Priority: 0, Abortable: kind == steps.Deploy,
			ArgsInfo: map[string]steps.ArgInfo{
				"create_root_volume":     {Description: "Whether to create the root volume. Default true."},
				"create_nonroot_volumes": {Description: "Whether to create the non-root volumes. Default true."},
			}},
		{Interface: string(KindRAID), Name: "delete_configuration", Priority: 0, Abortable: kind == steps.Deploy},
	}
}

// ExecuteStep runs create_configuration or delete_configuration.
func (f *FakeRAID) ExecuteStep(ctx context.Context, t *Task, kind steps.Kind, s steps.Step) (StepResult, error) {
	if !HasStep(f, kind, s.Name) {
		return StepResult{}, f.stepNotFound(kind, s.Name)
	}
	if err := f.begin(ctx, t, s.Name); err != nil {
		return StepResult{}, err
	}
	if s.Name == "create_configuration" {
		t.SetDriverInternalInfo(FakeRAIDConfiguredKey, true)
	} else {
		t.DeleteDriverInternalInfo(FakeRAIDConfiguredKey)
	}
	return StepResult{}, nil
}

// FakeConsole is the "fake" console implementation.
type FakeConsole struct{ fakeBase }

// NewFakeConsole returns the "fake" console implementation.
func NewFakeConsole(cfg FakeConfig) *FakeConsole { return &FakeConsole{fakeBase{KindConsole, cfg}} }

// StartConsole records the console as enabled.
func (f *FakeConsole) StartConsole(ctx context.Context, t *Task) error {
	if err := f.begin(ctx, t, "start_console"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(FakeConsoleEnabledKey, true)
	return nil
}

// StopConsole records the console as disabled.
func (f *FakeConsole) StopConsole(ctx context.Context, t *Task) error {
	if err := f.begin(ctx, t, "stop_console"); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(FakeConsoleEnabledKey)
	return nil
}

// GetConsole returns a fake:// URL when the console is enabled and an
// empty URL otherwise.
func (f *FakeConsole) GetConsole(ctx context.Context, t *Task) (ConsoleInfo, error) {
	if err := f.begin(ctx, t, "get_console"); err != nil {
		return ConsoleInfo{}, err
	}
	if on, _ := t.DriverInternalInfo[FakeConsoleEnabledKey].(bool); on {
		return ConsoleInfo{Type: "fake", URL: "fake://console/" + t.NodeUUID}, nil
	}
	return ConsoleInfo{Type: "fake"}, nil
}

// FakeVendor is the "fake" vendor implementation with two passthru
// methods: first_method (POST, requires "bar", returns it) and echo (GET
// or POST, returns its arguments).
type FakeVendor struct{ fakeBase }

// NewFakeVendor returns the "fake" vendor implementation.
func NewFakeVendor(cfg FakeConfig) *FakeVendor { return &FakeVendor{fakeBase{KindVendor, cfg}} }

// Methods returns first_method and echo.
func (f *FakeVendor) Methods() []VendorMethod {
	return []VendorMethod{
		{Name: "first_method", Description: "Returns its bar argument.", HTTPMethods: []string{"POST"},
			ArgsInfo: map[string]steps.ArgInfo{"bar": {Description: "Any value.", Required: true}}},
		{Name: "echo", Description: "Returns its arguments.", HTTPMethods: []string{"GET", "POST"}},
	}
}

// Call runs a passthru method.
func (f *FakeVendor) Call(ctx context.Context, t *Task, method, httpMethod string, args map[string]any) (any, error) {
	var m *VendorMethod
	for _, vm := range f.Methods() {
		if vm.Name == method {
			m = &vm
			break
		}
	}
	if m == nil {
		return nil, &UnsupportedError{Kind: KindVendor, Impl: Fake, Operation: "vendor passthru " + method}
	}
	if !slices.Contains(m.HTTPMethods, httpMethod) {
		return nil, &InvalidParameterError{Node: t.NodeUUID, Kind: KindVendor, Impl: Fake, Field: "http_method", Key: method, Expected: fmt.Sprintf("one of %v, got %q", m.HTTPMethods, httpMethod)}
	}
	if err := f.begin(ctx, t, method); err != nil {
		return nil, err
	}
	switch method {
	case "first_method":
		bar, ok := args["bar"]
		if !ok {
			return nil, &MissingParameterError{Node: t.NodeUUID, Kind: KindVendor, Impl: Fake, Field: "args", Missing: []string{"bar"}}
		}
		return map[string]any{"bar": bar}, nil
	default:
		return cloneMap(args), nil
	}
}

// FakeRescue is the "fake" rescue implementation.
type FakeRescue struct{ fakeBase }

// NewFakeRescue returns the "fake" rescue implementation.
func NewFakeRescue(cfg FakeConfig) *FakeRescue { return &FakeRescue{fakeBase{KindRescue, cfg}} }

// Rescue records the node as rescued and finishes at once.
func (f *FakeRescue) Rescue(ctx context.Context, t *Task) (StepResult, error) {
	if err := f.begin(ctx, t, "rescue"); err != nil {
		return StepResult{}, err
	}
	t.SetDriverInternalInfo(FakeRescuedKey, true)
	return StepResult{}, nil
}

// Unrescue records the node as no longer rescued.
func (f *FakeRescue) Unrescue(ctx context.Context, t *Task) error {
	if err := f.begin(ctx, t, "unrescue"); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(FakeRescuedKey)
	return nil
}

// CleanUp forgets the rescue.
func (f *FakeRescue) CleanUp(ctx context.Context, t *Task) error {
	if err := f.begin(ctx, t, "clean_up"); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(FakeRescuedKey)
	return nil
}

// FakeFirmware is the "fake" firmware implementation with an update step
// (clean and service, priority 0).
type FakeFirmware struct{ fakeBase }

// NewFakeFirmware returns the "fake" firmware implementation.
func NewFakeFirmware(cfg FakeConfig) *FakeFirmware {
	return &FakeFirmware{fakeBase{KindFirmware, cfg}}
}

// CacheFirmwareComponents returns the bios and bmc components.
func (f *FakeFirmware) CacheFirmwareComponents(ctx context.Context, t *Task) ([]FirmwareComponent, error) {
	if err := f.begin(ctx, t, "cache_firmware_components"); err != nil {
		return nil, err
	}
	v, ok := t.InternalString(FakeFirmwareVersionKey)
	if !ok {
		v = fakeDefaultFirmware
	}
	return []FirmwareComponent{
		{Component: "bios", InitialVersion: fakeDefaultFirmware, CurrentVersion: v},
		{Component: "bmc", InitialVersion: fakeDefaultFirmware, CurrentVersion: v},
	}, nil
}

// Steps returns the update step for clean and service.
func (f *FakeFirmware) Steps(kind steps.Kind) []steps.Step {
	if kind != steps.Clean && kind != steps.Service {
		return nil
	}
	return []steps.Step{{Interface: string(KindFirmware), Name: "update", Priority: 0,
		ArgsInfo: map[string]steps.ArgInfo{"settings": {Description: "A list of {component, url} updates; the fake records the last url as the version.", Required: true}}}}
}

// ExecuteStep runs update: the version becomes the last settings item's url.
func (f *FakeFirmware) ExecuteStep(ctx context.Context, t *Task, kind steps.Kind, s steps.Step) (StepResult, error) {
	if !HasStep(f, kind, s.Name) {
		return StepResult{}, f.stepNotFound(kind, s.Name)
	}
	if err := f.begin(ctx, t, s.Name); err != nil {
		return StepResult{}, err
	}
	list, ok := s.Args["settings"].([]any)
	if !ok || len(list) == 0 {
		return StepResult{}, &InvalidParameterError{Node: t.NodeUUID, Kind: KindFirmware, Impl: Fake, Field: "args", Key: "settings", Expected: "a non-empty list of {component, url} objects"}
	}
	last, _ := list[len(list)-1].(map[string]any)
	url, _ := last["url"].(string)
	if url == "" {
		return StepResult{}, &InvalidParameterError{Node: t.NodeUUID, Kind: KindFirmware, Impl: Fake, Field: "args", Key: "settings", Expected: "each item to have a url"}
	}
	t.SetDriverInternalInfo(FakeFirmwareVersionKey, url)
	return StepResult{}, nil
}

// FakeNetwork is the "fake" network implementation; it records the
// networks a node is attached to.
type FakeNetwork struct{ fakeBase }

// NewFakeNetwork returns the "fake" network implementation.
func NewFakeNetwork(cfg FakeConfig) *FakeNetwork { return &FakeNetwork{fakeBase{KindNetwork, cfg}} }

// AddNetwork records purpose.
func (f *FakeNetwork) AddNetwork(ctx context.Context, t *Task, purpose NetworkPurpose) error {
	if err := f.begin(ctx, t, "add_"+string(purpose)+"_network"); err != nil {
		return err
	}
	nets := fakeNetworks(t)
	if !slices.Contains(nets, string(purpose)) {
		nets = append(nets, string(purpose))
	}
	t.SetDriverInternalInfo(FakeNetworksKey, toAnySlice(nets))
	return nil
}

// RemoveNetwork forgets purpose.
func (f *FakeNetwork) RemoveNetwork(ctx context.Context, t *Task, purpose NetworkPurpose) error {
	if err := f.begin(ctx, t, "remove_"+string(purpose)+"_network"); err != nil {
		return err
	}
	nets := slices.DeleteFunc(fakeNetworks(t), func(s string) bool { return s == string(purpose) })
	t.SetDriverInternalInfo(FakeNetworksKey, toAnySlice(nets))
	return nil
}

func fakeNetworks(t *Task) []string {
	var out []string
	list, _ := t.DriverInternalInfo[FakeNetworksKey].([]any)
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

// FakeStorage is the "fake" storage implementation.
type FakeStorage struct{ fakeBase }

// NewFakeStorage returns the "fake" storage implementation.
func NewFakeStorage(cfg FakeConfig) *FakeStorage { return &FakeStorage{fakeBase{KindStorage, cfg}} }

// AttachVolumes records the volumes as attached.
func (f *FakeStorage) AttachVolumes(ctx context.Context, t *Task) error {
	if err := f.begin(ctx, t, "attach_volumes"); err != nil {
		return err
	}
	t.SetDriverInternalInfo(FakeVolumesAttachedKey, true)
	return nil
}

// DetachVolumes records the volumes as detached.
func (f *FakeStorage) DetachVolumes(ctx context.Context, t *Task) error {
	if err := f.begin(ctx, t, "detach_volumes"); err != nil {
		return err
	}
	t.DeleteDriverInternalInfo(FakeVolumesAttachedKey)
	return nil
}

// ShouldWriteImage returns true.
func (f *FakeStorage) ShouldWriteImage(ctx context.Context, t *Task) (bool, error) {
	if err := f.begin(ctx, t, "should_write_image"); err != nil {
		return false, err
	}
	return true, nil
}

// Interface guards.
var (
	_ PowerInterface      = (*FakePower)(nil)
	_ ManagementInterface = (*FakeManagement)(nil)
	_ NMIInjector         = (*FakeManagement)(nil)
	_ IndicatorManager    = (*FakeManagement)(nil)
	_ SecureBootManager   = (*FakeManagement)(nil)
	_ SensorReader        = (*FakeManagement)(nil)
	_ BootModeManager     = (*FakeManagement)(nil)
	_ BootInterface       = (*FakeBoot)(nil)
	_ DeployInterface     = (*FakeDeploy)(nil)
	_ StepPreparer        = (*FakeDeploy)(nil)
	_ StepProvider        = (*FakeDeploy)(nil)
	_ StepRunner          = (*FakeDeploy)(nil)
	_ InspectInterface    = (*FakeInspect)(nil)
	_ BIOSInterface       = (*FakeBIOS)(nil)
	_ StepRunner          = (*FakeBIOS)(nil)
	_ RAIDInterface       = (*FakeRAID)(nil)
	_ StepRunner          = (*FakeRAID)(nil)
	_ ConsoleInterface    = (*FakeConsole)(nil)
	_ VendorInterface     = (*FakeVendor)(nil)
	_ RescueInterface     = (*FakeRescue)(nil)
	_ FirmwareInterface   = (*FakeFirmware)(nil)
	_ StepRunner          = (*FakeFirmware)(nil)
	_ NetworkInterface    = (*FakeNetwork)(nil)
	_ StorageInterface    = (*FakeStorage)(nil)
)
