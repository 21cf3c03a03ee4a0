package rfdriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/anvilmetal/anvil/driver"
)

// Names of the hardware type and of the implementations this package
// provides, as Ironic names them.
const (
	HardwareType     = "redfish"
	ImplRedfish      = "redfish"
	ImplVirtualMedia = "redfish-virtual-media"
)

// HardwareTypeDef returns the redfish hardware type: Ironic's generic
// lists with the redfish implementations first where Ironic puts them.
func HardwareTypeDef() driver.HardwareType {
	return driver.HardwareType{
		Name: HardwareType,
		Supported: map[driver.Kind][]string{
			driver.KindBIOS:       {ImplRedfish, driver.NoBIOS},
			driver.KindBoot:       {"ipxe", "pxe", "http-ipxe", "http", ImplVirtualMedia},
			driver.KindDeploy:     {"autodetect", "direct", "ansible", "ramdisk", "anaconda", "bootc", "custom-agent"},
			driver.KindFirmware:   {ImplRedfish, driver.NoFirmware},
			driver.KindInspect:    {ImplRedfish, "agent", driver.NoInspect},
			driver.KindManagement: {ImplRedfish},
			driver.KindPower:      {ImplRedfish},
			driver.KindRAID:       {ImplRedfish, driver.NoRAID, "agent"},
			// GenericHardware's: the agent's rescue ramdisk.
			driver.KindRescue: {driver.NoRescue, "agent"},
			driver.KindVendor: {ImplRedfish, driver.NoVendor},
			// GenericHardware's; flat and noop are Anvil's built-ins.
			driver.KindNetwork: {driver.Flat, "neutron", "ironic-networking", driver.Noop},
		},
	}
}

// Drivers holds what the redfish implementations share: the connection
// pool (one session per BMC) and the timing options. Close logs out every
// session and removes the deploy ISO cache's private directory.
type Drivers struct {
	pool *Pool
	opts Options
	isos *isoCache
}

// NewDrivers returns the redfish implementations' shared state.
func NewDrivers(opts Options) *Drivers {
	opts.defaults()
	return &Drivers{pool: NewPool(opts), opts: opts, isos: newISOCache(opts)}
}

// Close logs out every BMC session and removes the deploy ISO cache's
// private directory.
func (d *Drivers) Close(ctx context.Context) error {
	return errors.Join(d.pool.Close(ctx), d.isos.close())
}

// Bundle returns the hardware type and every implementation, ready for
// driver.Registry.Register or the plugin SDK.
func (d *Drivers) Bundle() driver.Bundle {
	return driver.Bundle{
		HardwareTypes: []driver.HardwareType{HardwareTypeDef()},
		Implementations: []driver.Implementation{
			{Kind: driver.KindPower, Name: ImplRedfish, Impl: d.Power()},
			{Kind: driver.KindManagement, Name: ImplRedfish, Impl: d.Management()},
			{Kind: driver.KindBoot, Name: ImplVirtualMedia, Impl: d.VirtualMediaBoot()},
			{Kind: driver.KindInspect, Name: ImplRedfish, Impl: d.Inspect()},
			{Kind: driver.KindBIOS, Name: ImplRedfish, Impl: d.BIOS()},
			{Kind: driver.KindRAID, Name: ImplRedfish, Impl: d.RAID()},
			{Kind: driver.KindFirmware, Name: ImplRedfish, Impl: d.Firmware()},
			{Kind: driver.KindVendor, Name: ImplRedfish, Impl: d.Vendor()},
		},
	}
}

// base is what every implementation shares: its kind and name, and the
// route from a Task to the node's System.
type base struct {
	d    *Drivers
	kind driver.Kind
	name string
}

func (b base) properties() []driver.Property {
	ps := Properties()
	out := make([]driver.Property, 0, len(ps))
	for _, p := range ps {
		out = append(out, driver.Property{Name: p.Name, Description: p.Description, Required: p.Required})
	}
	return out
}

// Properties returns the redfish driver_info properties.
func (b base) Properties() []driver.Property { return b.properties() }

// Validate checks the redfish_* driver_info without contacting the BMC.
func (b base) Validate(ctx context.Context, t *driver.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := b.info(t)
	return err
}

func (b base) info(t *driver.Task) (Info, error) {
	return ParseInfo(driver.ReadDriverInfo(t, b.kind, b.name))
}

// paramError names the node, kind and implementation in a
// *driver.InvalidParameterError the connection pool returned without
// them (it serves every node on a BMC, so it knows none of them).
func (b base) paramError(t *driver.Task, err error) error {
	var ie *driver.InvalidParameterError
	if !errors.As(err, &ie) || ie.Node != "" {
		return err
	}
	named := *ie
	named.Node, named.Kind, named.Impl = t.NodeUUID, b.kind, b.name
	return &named
}

// system resolves the node's own ComputerSystem on the (shared) BMC
// connection and checks that it is still the machine recorded for the
// node (driver.CheckIdentity with "redfish-uuid:<UUID>", recording it at
// first contact). Every power, boot-device, step and read action goes
// through it, so an action is refused with a *driver.IdentityMismatchError
// before anything is sent when another machine answers at the address.
func (b base) system(ctx context.Context, t *driver.Task) (*System, error) {
	info, err := b.info(t)
	if err != nil {
		return nil, err
	}
	c, err := b.d.pool.Conn(info)
	if err != nil {
		return nil, b.paramError(t, err)
	}
	sys, err := c.System(ctx, info.SystemID)
	var se *SystemSelectionError
	if errors.As(err, &se) {
		return nil, &driver.InvalidParameterError{Node: t.NodeUUID, Kind: b.kind, Impl: b.name, Field: "driver_info", Key: "redfish_system_id",
			Expected: se.Error()}
	}
	if err != nil {
		return nil, b.wrap(t, "find system", err)
	}
	if id := sys.UUID(); id != "" {
		if err := driver.CheckIdentity(t, b.kind, b.name, info.Endpoint, "redfish-uuid:"+id); err != nil {
			return nil, err
		}
	}
	return sys, nil
}

// wrap prefixes err with the component and node, as "power/redfish: node
// X: op: ...". Refused credentials become a *driver.BMCAuthError, the
// typed error every driver reports them with.
func (b base) wrap(t *driver.Task, op string, err error) error {
	if err == nil {
		return nil
	}
	var ae *driver.BMCAuthError
	if errors.Is(err, ErrAuth) && !errors.As(err, &ae) {
		addr, _ := t.DriverInfoString("redfish_address")
		user, _ := t.DriverInfoString("redfish_username")
		return &driver.BMCAuthError{Node: t.NodeUUID, Kind: b.kind, Impl: b.name, Address: addr, Username: user,
			Detail: fmt.Sprintf("%s: %v", op, err)}
	}
	return fmt.Errorf("%s/%s: node %s: %s: %w", b.kind, b.name, t.NodeUUID, op, err)
}

func (b base) unsupported(op string) error {
	return &driver.UnsupportedError{Kind: b.kind, Impl: b.name, Operation: op}
}

// waitPower polls until the system reports want, or timeout passes.
func (b base) waitPower(ctx context.Context, t *driver.Task, sys *System, want string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = b.d.opts.PowerTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ps, err := sys.PowerState()
		if err == nil && ps == want {
			return nil
		}
		if serr := b.d.opts.Sleep(ctx, b.d.opts.PollInterval); serr != nil {
			if err == nil {
				err = fmt.Errorf("still %s after %s", ps, timeout)
			}
			return b.wrap(t, "wait for power "+want, fmt.Errorf("%w: %w", ErrTimeout, err))
		}
	}
}

// ErrTimeout is wrapped when a power state or task did not complete in
// time.
var ErrTimeout = errors.New("timed out")
