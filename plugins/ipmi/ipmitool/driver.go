package ipmitool

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/steps"
)

// Names of the hardware type and of the implementations, as Ironic names
// them.
const (
	HardwareType = "ipmi"
	ImplIPMITool = "ipmitool"
	// ImplSocatConsole is the serial-over-LAN console interface. It runs
	// on the conductor host (package console/ipmisol), not in this
	// plugin: a console is a long-running ipmitool process and a TCP
	// port there.
	ImplSocatConsole = "ipmitool-socat"
)

// HardwareTypeDef returns the ipmi hardware type with Ironic's lists.
// Its console list names ipmitool-socat before no-console, as Ironic's
// does; nodes still default to no-console until the embedder enables
// ipmitool-socat (driver.Config.EnabledInterfaces), because an enabled
// console list left empty is computed as no-console alone.
func HardwareTypeDef() driver.HardwareType {
	return driver.HardwareType{
		Name: HardwareType,
		Supported: map[driver.Kind][]string{
			driver.KindBoot:   {"ipxe", "pxe", "http-ipxe", "http"},
			driver.KindDeploy: {"autodetect", "direct", "ansible", "ramdisk", "anaconda", "bootc", "custom-agent"},
			// GenericHardware's: in-band inspection by the ramdisk.
			driver.KindInspect:    {"agent", driver.NoInspect},
			driver.KindManagement: {ImplIPMITool, driver.Noop},
			driver.KindPower:      {ImplIPMITool},
			driver.KindVendor:     {ImplIPMITool, driver.NoVendor},
			driver.KindConsole:    {ImplSocatConsole, driver.NoConsole},
			// GenericHardware's: in-band RAID by the ramdisk.
			driver.KindRAID: {driver.NoRAID, "agent"},
			// GenericHardware's: the agent's rescue ramdisk.
			driver.KindRescue: {driver.NoRescue, "agent"},
			// GenericHardware's; flat and noop are Anvil's built-ins.
			driver.KindNetwork: {driver.Flat, "neutron", "ironic-networking", driver.Noop},
		},
	}
}

// Drivers holds what the ipmitool implementations share: client options
// and the result of looking for the ipmitool binary.
type Drivers struct {
	opts       Options
	missingErr error // non-nil when ipmitool is not installed
}

// NewDrivers looks for ipmitool once. When it is missing the
// implementations still describe themselves, and every Validate and call
// fails with an error wrapping ErrNotInstalled that says why (see
// Unavailable).
func NewDrivers(opts Options) *Drivers {
	opts.defaults()
	_, err := opts.lookup()
	return &Drivers{opts: opts, missingErr: err}
}

// Unavailable returns why the ipmi hardware type cannot work on this host
// (ipmitool not installed), or nil.
func (d *Drivers) Unavailable() error { return d.missingErr }

// Bundle returns the hardware type and the three ipmitool implementations.
func (d *Drivers) Bundle() driver.Bundle {
	return driver.Bundle{
		HardwareTypes: []driver.HardwareType{HardwareTypeDef()},
		Implementations: []driver.Implementation{
			{Kind: driver.KindPower, Name: ImplIPMITool, Impl: d.Power()},
			{Kind: driver.KindManagement, Name: ImplIPMITool, Impl: d.Management()},
			{Kind: driver.KindVendor, Name: ImplIPMITool, Impl: d.Vendor()},
		},
	}
}

type base struct {
	d    *Drivers
	kind driver.Kind
}

// Properties returns the ipmi driver_info properties.
func (b base) Properties() []driver.Property {
	ps := Properties()
	out := make([]driver.Property, 0, len(ps))
	for _, p := range ps {
		out = append(out, driver.Property{Name: p.Name, Description: p.Description, Required: p.Required})
	}
	return out
}

// Validate checks the ipmi_* driver_info (and that ipmitool is
// installed) without contacting the BMC.
func (b base) Validate(ctx context.Context, t *driver.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := b.info(t)
	if err != nil {
		return err
	}
	if err := b.Unavailable(); err != nil {
		return b.wrap(t, "validate", err)
	}
	return nil
}

// Unavailable returns a *driver.UnavailableError (wrapping
// ErrNotInstalled) when ipmitool is not installed, or nil. Through the
// plugin it is carried in the describe, so the host reports the
// implementation unavailable.
func (b base) Unavailable() error {
	return driver.NewUnavailableError(b.kind, ImplIPMITool, b.d.missingErr)
}

func (b base) info(t *driver.Task) (Info, error) {
	return ParseInfo(driver.ReadDriverInfo(t, b.kind, ImplIPMITool))
}

func (b base) client(t *driver.Task) (*Client, error) {
	info, err := b.info(t)
	if err != nil {
		return nil, err
	}
	if err := b.Unavailable(); err != nil {
		return nil, b.wrap(t, "connect", err)
	}
	c, err := New(info, b.d.opts)
	if err != nil {
		return nil, b.wrap(t, "connect", err)
	}
	return c, nil
}

// wrap names the node, the interface and the operation in err. A refused
// password becomes a *driver.BMCAuthError and a BMC that never answered a
// *driver.BMCUnreachableError, both naming the BMC's host:port, so that
// they cross the plugin boundary with their fields; the password is in
// neither (ipmitool never sees it on its command line, and the client
// scrubs any echo of it).
func (b base) wrap(t *driver.Task, op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *CommandError
	if errors.As(err, &ce) {
		detail := op
		if ce.Op != op {
			detail += " (ipmitool " + ce.Op + ")"
		}
		if ce.Output != "" {
			detail += ": " + ce.Output
		}
		switch ce.Class {
		case FailAuth:
			return &driver.BMCAuthError{Node: t.NodeUUID, Kind: b.kind, Impl: ImplIPMITool, Address: ce.Endpoint, Username: ce.Username, Detail: detail}
		case FailNoAnswer:
			return &driver.BMCUnreachableError{Node: t.NodeUUID, Kind: b.kind, Impl: ImplIPMITool, Address: ce.Endpoint,
				Attempts: ce.Attempts, Waited: ce.Waited.Round(10 * time.Millisecond).String(), Detail: detail}
		}
	}
	return fmt.Errorf("%s/%s: node %s: %s: %w", b.kind, ImplIPMITool, t.NodeUUID, op, err)
}

// identityScheme prefixes the system GUID in the identity recorded for a
// node (driver.IdentityKey).
const identityScheme = "ipmi-guid:"

// checkIdentity reads the system GUID through c and compares it with the
// machine identity recorded for the node (recording it at first
// contact), so that an action meant for one machine is refused when the
// BMC at the node's address now belongs to another (a re-cabled port, a
// reused address). A BMC without Get System GUID reports nothing, which
// is accepted. The GUID is read once per Client, that is once per driver
// operation, before the operation's first command.
func (b base) checkIdentity(ctx context.Context, t *driver.Task, c *Client) error {
	guid, err := c.SystemGUID(ctx)
	if err != nil {
		return b.wrap(t, "identity check", err)
	}
	return driver.CheckIdentity(t, b.kind, ImplIPMITool, c.Endpoint(), reportedIdentity(guid))
}

// reportedIdentity is the machine identity for a system GUID; "" (no
// identity) when the BMC reports none.
func reportedIdentity(guid string) string {
	if guid == "" {
		return ""
	}
	return identityScheme + guid
}

// checkedClient returns a client whose BMC has been checked to report the
// node's recorded machine identity.
func (b base) checkedClient(ctx context.Context, t *driver.Task) (*Client, error) {
	c, err := b.client(t)
	if err != nil {
		return nil, err
	}
	if err := b.checkIdentity(ctx, t, c); err != nil {
		return nil, err
	}
	return c, nil
}

// PowerImpl is the "ipmitool" power interface.
type PowerImpl struct{ base }

// Power returns the "ipmitool" power interface.
func (d *Drivers) Power() *PowerImpl { return &PowerImpl{base{d, driver.KindPower}} }

// GetPowerState reads the chassis power state and, in the same ipmitool
// session, the system GUID, which it checks against the node's recorded
// machine identity (recording it at first contact): a power state read
// from another machine is an *driver.IdentityMismatchError, not a state.
func (p *PowerImpl) GetPowerState(ctx context.Context, t *driver.Task) (driver.PowerState, error) {
	c, err := p.client(t)
	if err != nil {
		return driver.PowerError, err
	}
	on, guid, err := c.PowerStateAndGUID(ctx)
	if err != nil {
		return driver.PowerError, p.wrap(t, "power status", err)
	}
	if err := driver.CheckIdentity(t, p.kind, ImplIPMITool, c.Endpoint(), reportedIdentity(guid)); err != nil {
		return driver.PowerError, err
	}
	if on {
		return driver.PowerOn, nil
	}
	return driver.PowerOff, nil
}

// SetPowerState drives the node to target and waits until the BMC
// reports the resulting state.
func (p *PowerImpl) SetPowerState(ctx context.Context, t *driver.Task, target driver.PowerState, timeout time.Duration) error {
	switch target {
	case driver.PowerOn, driver.PowerOff, driver.SoftPowerOff, driver.Reboot, driver.SoftReboot:
	default:
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: p.kind, Impl: ImplIPMITool, Field: "target", Key: "power_state", Expected: "power on, power off, soft power off, rebooting or soft rebooting"}
	}
	c, err := p.checkedClient(ctx, t)
	if err != nil {
		return err
	}
	switch target {
	case driver.PowerOn:
		err = c.PowerOn(ctx, timeout)
	case driver.PowerOff:
		err = c.PowerOff(ctx, timeout)
	case driver.SoftPowerOff:
		err = c.SoftPowerOff(ctx, timeout)
	case driver.Reboot:
		err = c.Reboot(ctx, timeout)
	case driver.SoftReboot:
		err = c.SoftReboot(ctx, timeout)
	}
	return p.wrap(t, "set power "+string(target), err)
}

// Reboot powers the node off and on.
func (p *PowerImpl) Reboot(ctx context.Context, t *driver.Task, timeout time.Duration) error {
	return p.SetPowerState(ctx, t, driver.Reboot, timeout)
}

// ManagementImpl is the "ipmitool" management interface: boot device
// (with the UEFI flag when the node boots in UEFI mode), NMI and sensors.
type ManagementImpl struct{ base }

// Management returns the "ipmitool" management interface.
func (d *Drivers) Management() *ManagementImpl {
	return &ManagementImpl{base{d, driver.KindManagement}}
}

var ipmiDevices = map[driver.BootDevice]string{
	driver.BootPXE: "pxe", driver.BootDisk: "disk", driver.BootCDROM: "cdrom", driver.BootBIOS: "bios", driver.BootSafe: "safe",
}

// SupportedBootDevices returns pxe, disk, cdrom, bios and safe.
func (m *ManagementImpl) SupportedBootDevices(context.Context, *driver.Task) ([]driver.BootDevice, error) {
	return []driver.BootDevice{driver.BootPXE, driver.BootDisk, driver.BootCDROM, driver.BootBIOS, driver.BootSafe}, nil
}

// uefi reports whether the node boots in UEFI mode: instance_info
// deploy_boot_mode, else the boot_mode capability, as Ironic decides.
func uefi(t *driver.Task) bool {
	if m, ok := t.InstanceString("deploy_boot_mode"); ok {
		return m == "uefi"
	}
	caps, _ := t.Properties["capabilities"].(string)
	for _, c := range strings.Split(caps, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(c), ":"); ok && k == "boot_mode" {
			return v == "uefi"
		}
	}
	return false
}

// SetBootDevice sets the next boot device (persistent or one-time).
func (m *ManagementImpl) SetBootDevice(ctx context.Context, t *driver.Task, device driver.BootDevice, persistent bool) error {
	dev, ok := ipmiDevices[device]
	if !ok {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: m.kind, Impl: ImplIPMITool, Field: "args", Key: "boot_device", Expected: "one of pxe, disk, cdrom, bios, safe"}
	}
	c, err := m.checkedClient(ctx, t)
	if err != nil {
		return err
	}
	return m.wrap(t, "set boot device "+dev, c.SetBootDevice(ctx, dev, persistent, uefi(t)))
}

// GetBootDevice reads the boot flags back. The persistent flag is
// reported as the BMC keeps it (some BMCs, ipmi_sim among them, keep only
// the device).
func (m *ManagementImpl) GetBootDevice(ctx context.Context, t *driver.Task) (driver.BootDeviceState, error) {
	c, err := m.client(t)
	if err != nil {
		return driver.BootDeviceState{}, err
	}
	bd, err := c.BootDevice(ctx)
	if err != nil {
		return driver.BootDeviceState{}, m.wrap(t, "get boot device", err)
	}
	persistent := bd.Persistent
	return driver.BootDeviceState{Device: driver.BootDevice(bd.Device), Persistent: &persistent}, nil
}

// InjectNMI sends a diagnostic interrupt.
func (m *ManagementImpl) InjectNMI(ctx context.Context, t *driver.Task) error {
	c, err := m.checkedClient(ctx, t)
	if err != nil {
		return err
	}
	return m.wrap(t, "inject nmi", c.NMI(ctx))
}

// Sensors reads the BMC's sensor data repository ("sdr elist full") as
// typed readings: the type is taken from the unit (degrees C is a
// temperature, RPM a fan, Volts a voltage, Amps a current, Watts a
// power reading), and a reading that is not a number ("No Reading", a
// discrete state) has no Value. A BMC without sensors yields none.
func (m *ManagementImpl) Sensors(ctx context.Context, t *driver.Task) ([]driver.SensorReading, error) {
	raw, err := m.SensorsData(ctx, t)
	if err != nil {
		return nil, err
	}
	out := make([]driver.SensorReading, 0, len(raw))
	for _, s := range raw {
		out = append(out, typedSensor(s))
	}
	return out, nil
}

// typedSensor converts one parsed sdr line.
func typedSensor(s Sensor) driver.SensorReading {
	r := driver.SensorReading{Name: s.Name, Type: driver.SensorOther, Status: s.Status, Reading: strings.TrimSpace(s.Reading + " " + s.Unit)}
	v, err := strconv.ParseFloat(s.Reading, 64)
	if err != nil {
		return r
	}
	r.Value, r.Units = &v, s.Unit
	switch u := strings.ToLower(s.Unit); {
	case strings.Contains(u, "degrees"):
		r.Type = driver.SensorTemperature
	case u == "rpm":
		r.Type = driver.SensorFan
	case strings.HasPrefix(u, "volt"):
		r.Type = driver.SensorVoltage
	case strings.HasPrefix(u, "amp"):
		r.Type = driver.SensorCurrent
	case strings.HasPrefix(u, "watt"):
		r.Type = driver.SensorPower
	}
	return r
}

// Health reads the node's hardware health (driver.HealthReader) from the
// chassis status and the sensor data repository. Ironic's ipmitool
// management reads none; Anvil's is: Critical when the chassis reports a
// power overload, a main power or power control fault or a cooling/fan
// fault, or a sensor is critical or non-recoverable ("cr", "nr");
// Warning when the chassis reports a drive fault or a sensor is
// non-critical ("nc"); OK otherwise. A BMC without sensors is judged by
// its chassis status alone.
func (m *ManagementImpl) Health(ctx context.Context, t *driver.Task) (driver.Health, error) {
	c, err := m.client(t)
	if err != nil {
		return driver.HealthUnknown, err
	}
	st, err := c.ChassisStatus(ctx)
	if err != nil {
		return driver.HealthUnknown, m.wrap(t, "read chassis status", err)
	}
	sensors, err := c.Sensors(ctx)
	if err != nil {
		return driver.HealthUnknown, m.wrap(t, "read sensors", err)
	}
	return ipmiHealth(st, sensors), nil
}

// ipmiHealth judges a chassis status and sensor readings (see Health).
func ipmiHealth(st ChassisStatus, sensors []Sensor) driver.Health {
	h := driver.HealthOK
	if st.PowerOverload || st.MainPowerFault || st.PowerControlFault || st.CoolingFault {
		h = driver.HealthCritical
	} else if st.DriveFault {
		h = driver.HealthWarning
	}
	for _, s := range sensors {
		switch s.Status {
		case "cr", "nr":
			h = h.Worse(driver.HealthCritical)
		case "nc":
			h = h.Worse(driver.HealthWarning)
		}
	}
	return h
}

// SensorsData reads the BMC's sensors as ipmitool prints them.
func (m *ManagementImpl) SensorsData(ctx context.Context, t *driver.Task) ([]Sensor, error) {
	c, err := m.client(t)
	if err != nil {
		return nil, err
	}
	s, err := c.Sensors(ctx)
	return s, m.wrap(t, "read sensors", err)
}

// Steps returns clear_system_event_log, an out-of-band step (priority 0,
// run only when requested, no ramdisk). Ironic's ipmitool management has
// no steps; this one is Anvil's (ipmitool's "sel clear").
func (m *ManagementImpl) Steps(kind steps.Kind) []steps.Step {
	switch kind {
	case steps.Clean, steps.Service:
		return []steps.Step{{Interface: string(driver.KindManagement), Name: "clear_system_event_log", Priority: 0}}
	}
	return nil
}

// ExecuteStep runs clear_system_event_log.
func (m *ManagementImpl) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, step steps.Step) (driver.StepResult, error) {
	if !driver.HasStep(m, kind, step.Name) {
		return driver.StepResult{}, &driver.StepNotFoundError{Kind: m.kind, Impl: ImplIPMITool, StepKind: string(kind), Step: step.Name}
	}
	c, err := m.checkedClient(ctx, t)
	if err != nil {
		return driver.StepResult{}, err
	}
	if err := c.ClearSEL(ctx); err != nil {
		return driver.StepResult{}, m.wrap(t, "clear_system_event_log", err)
	}
	return driver.StepResult{}, nil
}

// VendorImpl is the "ipmitool" vendor interface: send_raw and bmc_reset,
// as Ironic's ipmitool vendor passthru.
type VendorImpl struct{ base }

// Vendor returns the "ipmitool" vendor interface.
func (d *Drivers) Vendor() *VendorImpl { return &VendorImpl{base{d, driver.KindVendor}} }

// Methods lists send_raw and bmc_reset.
func (v *VendorImpl) Methods() []driver.VendorMethod {
	return []driver.VendorMethod{
		{Name: "send_raw", Description: "Send a raw IPMI request and return the response bytes.", HTTPMethods: []string{"POST"},
			ArgsInfo: map[string]steps.ArgInfo{"raw_bytes": {Description: "Network function, command and data as hex bytes separated by spaces, e.g. \"0x06 0x01\".", Required: true}}},
		{Name: "bmc_reset", Description: "Reset the BMC itself (cold by default).", HTTPMethods: []string{"POST"},
			ArgsInfo: map[string]steps.ArgInfo{"warm": {Description: "Do a warm reset instead of a cold one.", Required: false}}},
	}
}

// Call runs a vendor method.
func (v *VendorImpl) Call(ctx context.Context, t *driver.Task, method, httpMethod string, args map[string]any) (any, error) {
	if httpMethod != "POST" || (method != "send_raw" && method != "bmc_reset") {
		return nil, &driver.UnsupportedError{Kind: v.kind, Impl: ImplIPMITool, Operation: "vendor passthru " + httpMethod + " " + method}
	}
	var raw []byte
	if method == "send_raw" {
		s, _ := args["raw_bytes"].(string)
		var err error
		if raw, err = parseRawArg(s); err != nil || len(raw) < 2 {
			return nil, &driver.InvalidParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: ImplIPMITool, Field: "args", Key: "raw_bytes", Expected: "at least a network function and a command as hex bytes, e.g. \"0x06 0x01\""}
		}
	}
	c, err := v.checkedClient(ctx, t) // a raw request or a BMC reset must reach the node's own machine too
	if err != nil {
		return nil, err
	}
	if method == "bmc_reset" {
		warm, _ := args["warm"].(bool)
		return nil, v.wrap(t, "bmc_reset", c.ResetBMC(ctx, warm))
	}
	out, err := c.Raw(ctx, raw[0], raw[1], raw[2:])
	if err != nil {
		return nil, v.wrap(t, "send_raw", err)
	}
	hexOut := make([]string, len(out))
	for i, b := range out {
		hexOut[i] = fmt.Sprintf("0x%02x", b)
	}
	return map[string]any{"response": strings.Join(hexOut, " ")}, nil
}

func parseRawArg(s string) ([]byte, error) {
	var out []byte
	for _, f := range strings.Fields(s) {
		n, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(f), "0x"), 16, 8)
		if err != nil {
			return nil, err
		}
		out = append(out, byte(n))
	}
	return out, nil
}

// Compile-time checks.
var (
	_ driver.PowerInterface       = (*PowerImpl)(nil)
	_ driver.ManagementInterface  = (*ManagementImpl)(nil)
	_ driver.StepProvider         = (*ManagementImpl)(nil)
	_ driver.StepRunner           = (*ManagementImpl)(nil)
	_ driver.NMIInjector          = (*ManagementImpl)(nil)
	_ driver.SensorReader         = (*ManagementImpl)(nil)
	_ driver.HealthReader         = (*ManagementImpl)(nil)
	_ driver.AvailabilityReporter = (*ManagementImpl)(nil)
	_ driver.AvailabilityReporter = (*PowerImpl)(nil)
	_ driver.AvailabilityReporter = (*VendorImpl)(nil)
	_ driver.VendorInterface      = (*VendorImpl)(nil)
)
