package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/anvilmetal/anvil/driver"
	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
	"github.com/anvilmetal/anvil/steps"
)

// Bundle returns what the plugin described, with every implementation a
// proxy that calls the plugin process. Capabilities newer than the
// negotiated protocol version are left out.
func (p *Plugin) Bundle() (driver.Bundle, error) {
	p.mu.Lock()
	desc, version := p.desc, p.version
	p.mu.Unlock()
	if desc == nil {
		return driver.Bundle{}, fmt.Errorf("plugin %s (%s): not described yet", p.Name(), p.path)
	}
	var b driver.Bundle
	for _, h := range desc.HardwareTypes {
		ht := driver.HardwareType{Name: h.Name, SkipCompatibilityCheck: h.SkipCompatibilityCheck, Supported: map[driver.Kind][]string{}}
		for _, s := range h.Supported {
			ht.Supported[driver.Kind(s.Kind)] = slices.Clone(s.Names)
		}
		b.HardwareTypes = append(b.HardwareTypes, ht)
	}
	for _, i := range desc.Implementations {
		impl, err := p.newProxy(i, version)
		if err != nil {
			return driver.Bundle{}, err
		}
		b.Implementations = append(b.Implementations, driver.Implementation{Kind: driver.Kind(i.Kind), Name: i.Name, Impl: impl})
	}
	return b, nil
}

func (p *Plugin) newProxy(i *pb.Implementation, version int) (driver.Interface, error) {
	x := &proxy{plugin: p, kind: driver.Kind(i.Kind), name: i.Name}
	for _, pp := range i.Properties {
		x.props = append(x.props, driver.Property{Name: pp.Name, Description: pp.Description, Required: pp.Required})
	}
	if len(i.StepsJson) > 0 {
		if err := json.Unmarshal(i.StepsJson, &x.steps); err != nil {
			return nil, fmt.Errorf("plugin %s: steps of %s/%s: %w", p.Name(), i.Kind, i.Name, err)
		}
	}
	if len(i.VendorMethodsJson) > 0 {
		if err := json.Unmarshal(i.VendorMethodsJson, &x.methods); err != nil {
			return nil, fmt.Errorf("plugin %s: vendor methods of %s: %w", p.Name(), i.Name, err)
		}
	}
	x.caps = accepted(x.kind, i.Capabilities, version)
	x.runner = slices.ContainsFunc(x.caps, func(c capability) bool { return c.name == "step_runner" })
	if i.Unavailable != "" {
		x.unavailable = &driver.UnavailableError{Kind: x.kind, Impl: x.name, Reason: i.Unavailable}
	}
	switch x.kind {
	case driver.KindPower:
		return powerProxy{x}, nil
	case driver.KindManagement:
		return managementProxy{x}, nil
	case driver.KindBoot:
		return bootProxy{x}, nil
	case driver.KindDeploy:
		return deployProxy{x}, nil
	case driver.KindInspect:
		return inspectProxy{x}, nil
	case driver.KindBIOS:
		return biosProxy{x}, nil
	case driver.KindRAID:
		return raidProxy{x}, nil
	case driver.KindConsole:
		return consoleProxy{x}, nil
	case driver.KindVendor:
		return vendorProxy{x}, nil
	case driver.KindRescue:
		return rescueProxy{x}, nil
	case driver.KindFirmware:
		return firmwareProxy{x}, nil
	case driver.KindNetwork:
		return networkProxy{x}, nil
	case driver.KindStorage:
		return storageProxy{x}, nil
	}
	return nil, fmt.Errorf("plugin %s: %w: unknown interface kind %q", p.Name(), driver.ErrInvalidParameter, i.Kind)
}

// proxy is the part every proxied implementation shares: metadata from
// Describe and the call path.
type proxy struct {
	plugin  *Plugin
	kind    driver.Kind
	name    string
	props   []driver.Property
	steps   map[steps.Kind][]steps.Step
	methods []driver.VendorMethod
	// caps are the optional capabilities the plugin advertised and the
	// host accepts; Capability provides them.
	caps   []capability
	runner bool
	// unavailable is why the implementation cannot work on the plugin's
	// host, as described; nil when it can.
	unavailable error
}

// Properties returns the described properties.
func (x *proxy) Properties() []driver.Property { return slices.Clone(x.props) }

// Unavailable returns the *driver.UnavailableError the plugin described
// for the implementation, or nil.
func (x *proxy) Unavailable() error { return x.unavailable }

// Validate runs the plugin's Validate.
func (x *proxy) Validate(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opValidate, nil, nil)
}

// Steps returns the described steps of kind.
func (x *proxy) Steps(kind steps.Kind) []steps.Step { return slices.Clone(x.steps[kind]) }

// ExecuteStep runs a step in the plugin.
func (x *proxy) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, s steps.Step) (driver.StepResult, error) {
	var r driver.StepResult
	if !x.runner {
		return r, &driver.StepNotFoundError{Kind: x.kind, Impl: x.name, StepKind: string(kind), Step: s.Name}
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return r, fmt.Errorf("plugin %s: %s/%s: %w: step: %w", x.plugin.Name(), x.kind, x.name, driver.ErrInvalidParameter, err)
	}
	err = x.call(ctx, t, opExecuteStep, &invokeArgs{StepKind: kind, Step: raw}, &r)
	return r, err
}

// call sends one operation with t and args, applies the plugin's changes
// to t (also when the operation failed: a driver may record progress
// before failing) and decodes the result into out.
func (x *proxy) call(ctx context.Context, t *driver.Task, op string, args *invokeArgs, out any) error {
	pt, err := encodeTask(t)
	if err != nil {
		return fmt.Errorf("plugin %s: %s/%s %s: %w: %w", x.plugin.Name(), x.kind, x.name, op, driver.ErrInvalidParameter, err)
	}
	req := &pb.InvokeRequest{Kind: string(x.kind), Implementation: x.name, Operation: op, Task: pt}
	if args != nil {
		if req.ArgsJson, err = json.Marshal(args); err != nil {
			return fmt.Errorf("plugin %s: %s/%s %s: %w: %w", x.plugin.Name(), x.kind, x.name, op, driver.ErrInvalidParameter, err)
		}
	}
	ctx, span := x.startCall(ctx, t, op, req)
	err = x.invoke(ctx, t, op, req, out)
	endSpan(span, err)
	return err
}

// invoke sends req and applies its answer, as call says.
func (x *proxy) invoke(ctx context.Context, t *driver.Task, op string, req *pb.InvokeRequest, out any) error {
	resp, _, err := x.plugin.invoke(ctx, req)
	if err != nil {
		return err
	}
	changes, err := decodeChanges(resp.Changes)
	if err != nil {
		return fmt.Errorf("plugin %s: %s/%s %s: decoding changes: %w", x.plugin.Name(), x.kind, x.name, op, err)
	}
	t.Apply(changes)
	if resp.Error != nil {
		return decodeError(x.plugin.Name(), resp.Error)
	}
	if out != nil && len(resp.ResultJson) > 0 {
		if err := json.Unmarshal(resp.ResultJson, out); err != nil {
			return fmt.Errorf("plugin %s: %s/%s %s: decoding result: %w", x.plugin.Name(), x.kind, x.name, op, err)
		}
	}
	return nil
}

type powerProxy struct{ *proxy }

func (x powerProxy) GetPowerState(ctx context.Context, t *driver.Task) (driver.PowerState, error) {
	var s driver.PowerState
	err := x.call(ctx, t, opGetPowerState, nil, &s)
	return s, err
}

func (x powerProxy) SetPowerState(ctx context.Context, t *driver.Task, target driver.PowerState, timeout time.Duration) error {
	return x.call(ctx, t, opSetPowerState, &invokeArgs{Target: target, TimeoutNS: int64(timeout)}, nil)
}

func (x powerProxy) Reboot(ctx context.Context, t *driver.Task, timeout time.Duration) error {
	return x.call(ctx, t, opReboot, &invokeArgs{TimeoutNS: int64(timeout)}, nil)
}

type managementProxy struct{ *proxy }

func (x managementProxy) SupportedBootDevices(ctx context.Context, t *driver.Task) ([]driver.BootDevice, error) {
	var d []driver.BootDevice
	err := x.call(ctx, t, opSupportedBootDevices, nil, &d)
	return d, err
}

func (x managementProxy) SetBootDevice(ctx context.Context, t *driver.Task, device driver.BootDevice, persistent bool) error {
	return x.call(ctx, t, opSetBootDevice, &invokeArgs{Device: device, Persistent: persistent}, nil)
}

func (x managementProxy) GetBootDevice(ctx context.Context, t *driver.Task) (driver.BootDeviceState, error) {
	var s driver.BootDeviceState
	err := x.call(ctx, t, opGetBootDevice, nil, &s)
	return s, err
}

// The optional capabilities a proxy provides through Capability when the
// plugin advertised them (see capabilities). They hold the proxy in a
// named field so that none of its methods is promoted: a capability value
// has only its capability's methods.
type (
	preparerCap   struct{ x *proxy }
	bootModeCap   struct{ x *proxy }
	nmiCap        struct{ x *proxy }
	indicatorCap  struct{ x *proxy }
	secureBootCap struct{ x *proxy }
	sensorsCap    struct{ x *proxy }
	vmediaCap     struct{ x *proxy }
	healthCap     struct{ x *proxy }
)

func (c bootModeCap) GetBootMode(ctx context.Context, t *driver.Task) (driver.BootMode, error) {
	var m driver.BootMode
	err := c.x.call(ctx, t, opGetBootMode, nil, &m)
	return m, err
}

func (c bootModeCap) SetBootMode(ctx context.Context, t *driver.Task, mode driver.BootMode) error {
	return c.x.call(ctx, t, opSetBootMode, &invokeArgs{Mode: mode}, nil)
}

func (c nmiCap) InjectNMI(ctx context.Context, t *driver.Task) error {
	return c.x.call(ctx, t, opInjectNMI, nil, nil)
}

func (c indicatorCap) GetIndicatorState(ctx context.Context, t *driver.Task) (driver.IndicatorState, error) {
	var s driver.IndicatorState
	err := c.x.call(ctx, t, opGetIndicatorState, nil, &s)
	return s, err
}

func (c indicatorCap) SetIndicatorState(ctx context.Context, t *driver.Task, state driver.IndicatorState) error {
	return c.x.call(ctx, t, opSetIndicatorState, &invokeArgs{Indicator: state}, nil)
}

func (c secureBootCap) GetSecureBootState(ctx context.Context, t *driver.Task) (bool, error) {
	var on bool
	err := c.x.call(ctx, t, opGetSecureBootState, nil, &on)
	return on, err
}

func (c secureBootCap) SetSecureBootState(ctx context.Context, t *driver.Task, enabled bool) error {
	return c.x.call(ctx, t, opSetSecureBootState, &invokeArgs{Enabled: enabled}, nil)
}

func (c vmediaCap) AttachVirtualMedia(ctx context.Context, t *driver.Task, device driver.VirtualMediaDevice, imageURL string) error {
	return c.x.call(ctx, t, opAttachVirtualMedia, &invokeArgs{VMediaDevice: device, ImageURL: imageURL}, nil)
}

func (c vmediaCap) DetachVirtualMedia(ctx context.Context, t *driver.Task, devices []driver.VirtualMediaDevice) error {
	return c.x.call(ctx, t, opDetachVirtualMedia, &invokeArgs{VMediaDevices: devices}, nil)
}

func (c vmediaCap) VirtualMedia(ctx context.Context, t *driver.Task) ([]driver.VirtualMedia, error) {
	var out []driver.VirtualMedia
	err := c.x.call(ctx, t, opGetVirtualMedia, nil, &out)
	return out, err
}

func (c sensorsCap) Sensors(ctx context.Context, t *driver.Task) ([]driver.SensorReading, error) {
	var r []driver.SensorReading
	err := c.x.call(ctx, t, opGetSensorsData, nil, &r)
	return r, err
}

func (c healthCap) Health(ctx context.Context, t *driver.Task) (driver.Health, error) {
	var h driver.Health
	err := c.x.call(ctx, t, opGetNodeHealth, nil, &h)
	return h, err
}

type bootProxy struct{ *proxy }

func (x bootProxy) PrepareRamdisk(ctx context.Context, t *driver.Task, params map[string]any) error {
	return x.call(ctx, t, opPrepareRamdisk, &invokeArgs{Params: params}, nil)
}

func (x bootProxy) CleanUpRamdisk(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opCleanUpRamdisk, nil, nil)
}

func (x bootProxy) PrepareInstance(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opPrepareInstance, nil, nil)
}

func (x bootProxy) CleanUpInstance(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opCleanUpInstance, nil, nil)
}

type deployProxy struct{ *proxy }

func (x deployProxy) Prepare(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opPrepare, nil, nil)
}

func (x deployProxy) Deploy(ctx context.Context, t *driver.Task) (driver.StepResult, error) {
	var r driver.StepResult
	err := x.call(ctx, t, opDeploy, nil, &r)
	return r, err
}

func (x deployProxy) TearDown(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opTearDown, nil, nil)
}

func (x deployProxy) CleanUp(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opCleanUp, nil, nil)
}

func (x deployProxy) TakeOver(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opTakeOver, nil, nil)
}

func (c preparerCap) PrepareSteps(ctx context.Context, t *driver.Task, kind steps.Kind) (driver.StepResult, error) {
	var r driver.StepResult
	err := c.x.call(ctx, t, opPrepareSteps, &invokeArgs{StepKind: kind}, &r)
	return r, err
}

func (c preparerCap) TearDownSteps(ctx context.Context, t *driver.Task, kind steps.Kind) error {
	return c.x.call(ctx, t, opTearDownSteps, &invokeArgs{StepKind: kind}, nil)
}

type inspectProxy struct{ *proxy }

func (x inspectProxy) InspectHardware(ctx context.Context, t *driver.Task) (driver.StepResult, error) {
	var r driver.StepResult
	err := x.call(ctx, t, opInspectHardware, nil, &r)
	return r, err
}

type biosProxy struct{ *proxy }

func (x biosProxy) CacheBIOSSettings(ctx context.Context, t *driver.Task) ([]driver.BIOSSetting, error) {
	var s []driver.BIOSSetting
	err := x.call(ctx, t, opCacheBIOSSettings, nil, &s)
	return s, err
}

type raidProxy struct{ *proxy }

func (x raidProxy) ValidateRAIDConfig(ctx context.Context, t *driver.Task, config map[string]any) error {
	return x.call(ctx, t, opValidateRAIDConfig, &invokeArgs{Config: config}, nil)
}

type consoleProxy struct{ *proxy }

func (x consoleProxy) StartConsole(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opStartConsole, nil, nil)
}

func (x consoleProxy) StopConsole(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opStopConsole, nil, nil)
}

func (x consoleProxy) GetConsole(ctx context.Context, t *driver.Task) (driver.ConsoleInfo, error) {
	var c driver.ConsoleInfo
	err := x.call(ctx, t, opGetConsole, nil, &c)
	return c, err
}

type vendorProxy struct{ *proxy }

func (x vendorProxy) Methods() []driver.VendorMethod { return slices.Clone(x.methods) }

func (x vendorProxy) Call(ctx context.Context, t *driver.Task, method, httpMethod string, args map[string]any) (any, error) {
	var out any
	err := x.call(ctx, t, opVendorCall, &invokeArgs{Method: method, HTTPMethod: httpMethod, Args: args}, &out)
	return out, err
}

type rescueProxy struct{ *proxy }

func (x rescueProxy) Rescue(ctx context.Context, t *driver.Task) (driver.StepResult, error) {
	var r driver.StepResult
	err := x.call(ctx, t, opRescue, nil, &r)
	return r, err
}

func (x rescueProxy) Unrescue(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opUnrescue, nil, nil)
}

func (x rescueProxy) CleanUp(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opCleanUp, nil, nil)
}

type firmwareProxy struct{ *proxy }

func (x firmwareProxy) CacheFirmwareComponents(ctx context.Context, t *driver.Task) ([]driver.FirmwareComponent, error) {
	var c []driver.FirmwareComponent
	err := x.call(ctx, t, opCacheFirmwareComponents, nil, &c)
	return c, err
}

type networkProxy struct{ *proxy }

func (x networkProxy) AddNetwork(ctx context.Context, t *driver.Task, purpose driver.NetworkPurpose) error {
	return x.call(ctx, t, opAddNetwork, &invokeArgs{Purpose: purpose}, nil)
}

func (x networkProxy) RemoveNetwork(ctx context.Context, t *driver.Task, purpose driver.NetworkPurpose) error {
	return x.call(ctx, t, opRemoveNetwork, &invokeArgs{Purpose: purpose}, nil)
}

type storageProxy struct{ *proxy }

func (x storageProxy) AttachVolumes(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opAttachVolumes, nil, nil)
}

func (x storageProxy) DetachVolumes(ctx context.Context, t *driver.Task) error {
	return x.call(ctx, t, opDetachVolumes, nil, nil)
}

func (x storageProxy) ShouldWriteImage(ctx context.Context, t *driver.Task) (bool, error) {
	var b bool
	err := x.call(ctx, t, opShouldWriteImage, nil, &b)
	return b, err
}

// Interface guards.
var (
	_ driver.PowerInterface       = powerProxy{}
	_ driver.StepProvider         = powerProxy{}
	_ driver.StepRunner           = powerProxy{}
	_ driver.ManagementInterface  = managementProxy{}
	_ driver.BootModeManager      = bootModeCap{}
	_ driver.NMIInjector          = nmiCap{}
	_ driver.IndicatorManager     = indicatorCap{}
	_ driver.SecureBootManager    = secureBootCap{}
	_ driver.SensorReader         = sensorsCap{}
	_ driver.VirtualMediaManager  = vmediaCap{}
	_ driver.HealthReader         = healthCap{}
	_ driver.AvailabilityReporter = powerProxy{}
	_ driver.BootInterface        = bootProxy{}
	_ driver.DeployInterface      = deployProxy{}
	_ driver.StepPreparer         = preparerCap{}
	_ driver.CapabilityProvider   = powerProxy{}
	_ driver.InspectInterface     = inspectProxy{}
	_ driver.BIOSInterface        = biosProxy{}
	_ driver.RAIDInterface        = raidProxy{}
	_ driver.ConsoleInterface     = consoleProxy{}
	_ driver.VendorInterface      = vendorProxy{}
	_ driver.RescueInterface      = rescueProxy{}
	_ driver.FirmwareInterface    = firmwareProxy{}
	_ driver.NetworkInterface     = networkProxy{}
	_ driver.StorageInterface     = storageProxy{}
)
