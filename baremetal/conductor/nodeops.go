package conductor

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/jsonmap"
	"github.com/anvilmetal/anvil/steps"
)

// The synchronous node operations: what Ironic's API asks its conductor
// over RPC and gets an answer for at once (validate, boot device, RAID
// target, BIOS and firmware reads, vendor passthru, virtual media, NMI).
// Each one composes the node's driver from the registry and calls it,
// under the node's reservation where Ironic takes an exclusive lock and
// on a plain read of the node where Ironic takes a shared one (Anvil has
// no shared lock: a shared task is the node as read, and whatever the
// driver changes on it is dropped). A reservation is always released
// before the method returns, also after an error or a panic; a node
// locked by someone else fails with a *baremetal.NodeLockedError once the
// Options.LockPolicy's attempts are spent.

// ErrNoFreeWorker is returned when asynchronous work (an async vendor
// passthru method) finds no idle worker, as Ironic's NoFreeConductorWorker
// (HTTP 503). Nothing ran; retry later.
var ErrNoFreeWorker = errors.New("conductor: no free worker")

// NoFreeWorkerError names the node and the operation refused for want of
// an idle worker. It matches ErrNoFreeWorker.
type NoFreeWorkerError struct {
	// Node is the node's UUID.
	Node string
	// Operation is what could not start.
	Operation string
	// Host is the conductor.
	Host string
}

func (e *NoFreeWorkerError) Error() string {
	return fmt.Sprintf("%s on node %s refused: conductor %s has no free worker, retry later", e.Operation, e.Node, e.Host)
}

// Is reports whether target is ErrNoFreeWorker.
func (e *NoFreeWorkerError) Is(target error) bool { return target == ErrNoFreeWorker }

// ValidationResult is one interface's entry in what Validate reports, as
// Ironic's validate_driver_interfaces: Result says whether the node
// passes the interface's validation, and Reason, when it does not, why.
type ValidationResult struct {
	Result bool   `json:"result"`
	Reason string `json:"reason,omitempty"`
}

// ValidatedKinds returns the interface kinds Validate reports on, in
// Ironic's order: every kind but vendor (Ironic's non_vendor_interfaces).
// The caller owns the returned slice.
func ValidatedKinds() []driver.Kind {
	return slices.DeleteFunc(driver.Kinds(), func(k driver.Kind) bool { return k == driver.KindVendor })
}

// exclusive reserves node ident for a synchronous operation. The caller
// releases the task (defer t.release()).
func (c *Conductor) exclusive(ctx context.Context, ident string) (*task, error) {
	if err := c.checkRunning(); err != nil {
		return nil, err
	}
	return c.acquire(ctx, ident)
}

// shared reads node ident for an operation Ironic runs under a shared
// lock: no reservation is taken and nothing the driver changes is saved.
func (c *Conductor) shared(ctx context.Context, ident string) (*task, error) {
	if err := c.checkRunning(); err != nil {
		return nil, err
	}
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return nil, err
	}
	return c.newTask(n), nil
}

// syncCall runs fn with the node's implementation of kind as T (see
// callIface) and, when save is set (the task holds the reservation),
// saves what the driver changed on the node. Errors name the node.
func syncCall[T any](ctx context.Context, t *task, save bool, kind driver.Kind, op string, fn func(x T, v *driver.Task) error) error {
	changed := false
	err := callIface(ctx, t, kind, op, func(_ *driver.Driver, x T, v *driver.Task) error {
		err := fn(x, v)
		changed = !v.Changes().Empty()
		return err
	})
	if save && changed {
		if serr := t.save(ctx); serr != nil {
			return errors.Join(nodeErr(t, op, err), serr)
		}
	}
	return nodeErr(t, op, err)
}

// nodeErr names t's node in err unless the message already does.
func nodeErr(t *task, op string, err error) error {
	if err == nil || strings.Contains(err.Error(), t.uuid()) {
		return err
	}
	return fmt.Errorf("%s on node %s: %w", op, t.uuid(), err)
}

// Validate runs the validation of each of the node's interfaces but
// vendor (ValidatedKinds) and reports, per interface name, whether it
// passed and why not, as Ironic's validate_driver_interfaces: a no-op
// implementation (no-bios, no-console, ...) reports false with its
// "not supported" reason; the deploy interface also checks the deploy
// templates the instance's traits select (in-band steps an agent has not
// reported yet are skipped, as Ironic does, and as Deploy does). A failing interface is a
// result, not an error: the error is for the node itself (unknown, its
// driver not composable, the conductor not running). Validate reads the
// node without reserving it (Ironic's shared lock), so it also answers
// for a locked node, and changes nothing. Reasons carry no secret.
func (c *Conductor) Validate(ctx context.Context, ident string) (map[string]ValidationResult, error) {
	t, err := c.shared(ctx, ident)
	if err != nil {
		return nil, err
	}
	d, err := t.driver()
	if err != nil {
		return nil, err
	}
	v, err := t.view(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]ValidationResult, len(ValidatedKinds()))
	for _, k := range ValidatedKinds() {
		err := c.validateKind(ctx, t, d, k, v.Clone())
		if err == nil {
			out[string(k)] = ValidationResult{Result: true}
			continue
		}
		reason := describeErr(err)
		if !errors.Is(err, driver.ErrUnsupported) && !errors.Is(err, driver.ErrInvalidParameter) &&
			!errors.Is(err, driver.ErrMissingParameter) && !errors.Is(err, baremetal.ErrInvalidInput) {
			reason = fmt.Sprintf("Unexpected error on conductor %s: %s", c.host, reason)
		}
		out[string(k)] = ValidationResult{Reason: reason}
	}
	return out, nil
}

// validateKind validates the node's implementation of kind on a copy of
// the driver view.
func (c *Conductor) validateKind(ctx context.Context, t *task, d *driver.Driver, kind driver.Kind, v *driver.Task) (err error) {
	defer func() {
		// A panicking implementation fails its own row, not the others.
		if r := recover(); r != nil {
			err = fmt.Errorf("%s interface %s panicked: %v", kind, d.Names[kind], r)
		}
	}()
	impl := d.Interface(kind)
	if impl == nil {
		return &driver.UnsupportedError{Node: t.uuid(), Kind: kind, Operation: "validate"}
	}
	if err := impl.Validate(ctx, v); err != nil {
		return err
	}
	if kind != driver.KindDeploy {
		return nil
	}
	src, err := c.stepSource(ctx, t, steps.Deploy)
	if err != nil {
		return err
	}
	tpls, err := c.templates(ctx, t.node)
	if err != nil {
		return err
	}
	if _, err := c.planner().Deploy(steps.DeployRequest{Source: src, Templates: tpls,
		InstanceTraits: instanceTraits(t.node), SkipMissing: c.agentBased(t)}); err != nil {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: t.uuid(), Field: "instance_info.traits",
			Expected: "deploy templates whose steps the node's interfaces provide", Err: err}
	}
	return nil
}

// GetBootDevice reads the node's current boot device through its
// management interface, under the node's reservation (Ironic's exclusive
// lock), after the interface's validation. A device or persistence the
// hardware cannot tell is empty (nil).
func (c *Conductor) GetBootDevice(ctx context.Context, ident string) (driver.BootDeviceState, error) {
	t, err := c.exclusive(ctx, ident)
	if err != nil {
		return driver.BootDeviceState{}, err
	}
	defer t.release()
	var st driver.BootDeviceState
	err = syncCall(ctx, t, true, driver.KindManagement, "get boot device", func(m driver.ManagementInterface, v *driver.Task) error {
		if err := m.Validate(ctx, v); err != nil {
			return err
		}
		st, err = m.GetBootDevice(ctx, v)
		return err
	})
	return st, err
}

// SetBootDevice sets the device the node boots from next (every boot
// when persistent) through its management interface, under the node's
// reservation after the interface's validation, as Ironic's
// set_boot_device: a node locked by an operation in progress is refused
// with a *baremetal.NodeLockedError. A device the interface does not
// support fails with its *driver.InvalidParameterError.
func (c *Conductor) SetBootDevice(ctx context.Context, ident string, dev driver.BootDevice, persistent bool) error {
	if dev == "" {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "boot_device", Expected: "a boot device such as pxe or disk"}
	}
	t, err := c.exclusive(ctx, ident)
	if err != nil {
		return err
	}
	defer t.release()
	return syncCall(ctx, t, true, driver.KindManagement, "set boot device", func(m driver.ManagementInterface, v *driver.Task) error {
		if err := m.Validate(ctx, v); err != nil {
			return err
		}
		return m.SetBootDevice(ctx, v, dev, persistent)
	})
}

// SupportedBootDevices lists the boot devices the node's management
// interface can set. It reads the node without reserving it (Ironic's
// shared lock).
func (c *Conductor) SupportedBootDevices(ctx context.Context, ident string) ([]driver.BootDevice, error) {
	t, err := c.shared(ctx, ident)
	if err != nil {
		return nil, err
	}
	var devs []driver.BootDevice
	err = syncCall(ctx, t, false, driver.KindManagement, "get supported boot devices", func(m driver.ManagementInterface, v *driver.Task) error {
		var err error
		devs, err = m.SupportedBootDevices(ctx, v)
		return err
	})
	return devs, err
}

// InjectNMI sends a diagnostic interrupt to the node through its
// management interface's NMIInjector capability, under the node's
// reservation after the interface's validation. A management interface
// without the capability fails with a *driver.UnsupportedError.
func (c *Conductor) InjectNMI(ctx context.Context, ident string) error {
	t, err := c.exclusive(ctx, ident)
	if err != nil {
		return err
	}
	defer t.release()
	return syncCall(ctx, t, true, driver.KindManagement, "inject nmi", func(m driver.ManagementInterface, v *driver.Task) error {
		nmi, ok := driver.As[driver.NMIInjector](m)
		if !ok {
			return &driver.UnsupportedError{Node: t.uuid(), Kind: driver.KindManagement, Impl: v.Interfaces[driver.KindManagement], Operation: "inject nmi"}
		}
		if err := m.Validate(ctx, v); err != nil {
			return err
		}
		return nmi.InjectNMI(ctx, v)
	})
}

// SetTargetRAIDConfig stores cfg as the node's target_raid_config, the
// configuration the raid interface's create_configuration step builds,
// under the node's reservation, as Ironic's set_target_raid_config. A
// non-empty cfg is first validated by the node's raid interface (a no-raid
// node fails with a *driver.UnsupportedError, a configuration the
// interface refuses with its error, and nothing is stored); an empty (or
// nil) cfg clears the target without asking the interface.
func (c *Conductor) SetTargetRAIDConfig(ctx context.Context, ident string, cfg map[string]any) error {
	t, err := c.exclusive(ctx, ident)
	if err != nil {
		return err
	}
	defer t.release()
	cfg = jsonmap.Clone(cfg)
	if len(cfg) > 0 {
		err := syncCall(ctx, t, false, driver.KindRAID, "set target raid config", func(r driver.RAIDInterface, v *driver.Task) error {
			return r.ValidateRAIDConfig(ctx, v, jsonmap.Clone(cfg))
		})
		if err != nil {
			return err
		}
	} else {
		cfg = nil
	}
	t.node.TargetRAIDConfig = cfg
	return t.save(ctx)
}

// BIOSSettings returns the node's BIOS settings, read through its bios
// interface (CacheBIOSSettings) on each call. Ironic answers the API from
// its bios_settings table, refreshed at cleaning; Anvil keeps no such
// table, so the values are the BMC's at the time of the call. It reads the
// node without reserving it. A no-bios node fails with a
// *driver.UnsupportedError.
func (c *Conductor) BIOSSettings(ctx context.Context, ident string) ([]driver.BIOSSetting, error) {
	t, err := c.shared(ctx, ident)
	if err != nil {
		return nil, err
	}
	t.noPorts = true
	var out []driver.BIOSSetting
	err = syncCall(ctx, t, false, driver.KindBIOS, "get bios settings", func(b driver.BIOSInterface, v *driver.Task) error {
		var err error
		out, err = b.CacheBIOSSettings(ctx, v)
		return err
	})
	return out, err
}

// FirmwareComponents returns the node's firmware components and their
// versions, read through its firmware interface on each call (Ironic
// reads its firmware_information table; see BIOSSettings). It reads the
// node without reserving it. A no-firmware node fails with a
// *driver.UnsupportedError.
func (c *Conductor) FirmwareComponents(ctx context.Context, ident string) ([]driver.FirmwareComponent, error) {
	t, err := c.shared(ctx, ident)
	if err != nil {
		return nil, err
	}
	t.noPorts = true
	var out []driver.FirmwareComponent
	err = syncCall(ctx, t, false, driver.KindFirmware, "get firmware components", func(f driver.FirmwareInterface, v *driver.Task) error {
		var err error
		out, err = f.CacheFirmwareComponents(ctx, v)
		return err
	})
	return out, err
}

// VendorMethods lists the node's vendor passthru methods (empty for
// no-vendor, as Ironic's NoVendor has no routes). It reads the node
// without reserving it.
func (c *Conductor) VendorMethods(ctx context.Context, ident string) ([]driver.VendorMethod, error) {
	t, err := c.shared(ctx, ident)
	if err != nil {
		return nil, err
	}
	d, err := t.driver()
	if err != nil {
		return nil, err
	}
	vi, ok := d.Interface(driver.KindVendor).(driver.VendorInterface)
	if !ok {
		return nil, nil
	}
	return vi.Methods(), nil
}

// VendorPassthru calls the node's vendor passthru method with the HTTP
// verb httpMethod and args, as Ironic's vendor_passthru: an unknown
// method, or a verb the method does not accept, fails with a
// *driver.InvalidParameterError naming it; then, under the node's
// reservation (Ironic's vendor methods take the exclusive lock by
// default), the vendor interface validates the node and the method runs.
// A synchronous method returns its result; an asynchronous one
// (VendorMethod.Async) is handed to an idle worker, which keeps the
// reservation until it ends, and VendorPassthru returns async true and no
// result at once (a *NoFreeWorkerError when every worker is busy; the
// method's own failure is then recorded in last_error and the history).
// What the method changes on the node is saved.
func (c *Conductor) VendorPassthru(ctx context.Context, ident, method, httpMethod string, args map[string]any) (result any, async bool, err error) {
	if method == "" {
		return nil, false, &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "method", Expected: "the name of a vendor passthru method"}
	}
	httpMethod = strings.ToUpper(httpMethod)
	// The method is looked up on the node as read (Ironic's shared
	// lock), so a request for a method that does not exist fails at once
	// even on a locked node.
	s, err := c.shared(ctx, ident)
	if err != nil {
		return nil, false, err
	}
	m, err := vendorMethod(s, method, httpMethod)
	if err != nil {
		return nil, false, err
	}
	t, err := c.acquire(ctx, s.uuid())
	if err != nil {
		return nil, false, err
	}
	handed := false
	defer func() {
		if !handed {
			t.release()
		}
	}()
	// The node may have changed between the read and the reservation.
	if m, err = vendorMethod(t, method, httpMethod); err != nil {
		return nil, false, err
	}
	op := "vendor passthru " + method
	validate := func(vi driver.VendorInterface, v *driver.Task) error { return vi.Validate(ctx, v) }
	if err := syncCall(ctx, t, false, driver.KindVendor, op, validate); err != nil {
		return nil, false, err
	}
	args = jsonmap.Clone(args)
	call := func(ctx context.Context) (any, error) {
		var res any
		err := syncCall(ctx, t, true, driver.KindVendor, op, func(vi driver.VendorInterface, v *driver.Task) error {
			var err error
			res, err = vi.Call(ctx, v, method, httpMethod, args)
			return err
		})
		return res, err
	}
	if !m.Async {
		res, err := call(ctx)
		if err != nil {
			return nil, false, err
		}
		return res, false, nil
	}
	if !c.runOnWorker(t, func(ctx context.Context) {
		if _, err := call(ctx); err != nil {
			msg := fmt.Sprintf("Asynchronous vendor passthru method %s failed: %s", method, describeErr(err))
			t.node.LastError = msg
			if serr := t.save(ctx); serr != nil {
				c.log.Warn("cannot record a vendor passthru failure", "node", t.uuid(), "method", method, "error", serr)
			}
			c.history(ctx, t.uuid(), "vendor passthru failed", "vendor", msg, baremetal.HistoryError)
		}
	}) {
		return nil, false, &NoFreeWorkerError{Node: t.uuid(), Operation: op, Host: c.host}
	}
	handed = true
	return nil, true, nil
}

// vendorMethod finds method among the node's vendor passthru methods and
// checks that it accepts httpMethod.
func vendorMethod(t *task, method, httpMethod string) (driver.VendorMethod, error) {
	d, err := t.driver()
	if err != nil {
		return driver.VendorMethod{}, err
	}
	impl := d.Names[driver.KindVendor]
	vi, ok := d.Interface(driver.KindVendor).(driver.VendorInterface)
	if !ok {
		return driver.VendorMethod{}, &driver.UnsupportedError{Node: t.uuid(), Kind: driver.KindVendor, Operation: "vendor passthru " + method}
	}
	i := slices.IndexFunc(vi.Methods(), func(m driver.VendorMethod) bool { return m.Name == method })
	if i < 0 {
		return driver.VendorMethod{}, &driver.InvalidParameterError{Node: t.uuid(), Kind: driver.KindVendor, Impl: impl, Field: "method", Key: method,
			Expected: "a method the vendor interface provides (no handler for method " + method + ")"}
	}
	m := vi.Methods()[i]
	if !slices.ContainsFunc(m.HTTPMethods, func(s string) bool { return strings.EqualFold(s, httpMethod) }) {
		return driver.VendorMethod{}, &driver.InvalidParameterError{Node: t.uuid(), Kind: driver.KindVendor, Impl: impl, Field: "http_method", Key: method,
			Expected: fmt.Sprintf("one of %v (the method %s does not support HTTP %s)", m.HTTPMethods, method, httpMethod)}
	}
	return m, nil
}

// runOnWorker hands fn to a free worker with t's reservation, which the
// worker releases when fn returns; false means every worker was busy (or
// the conductor is stopping) and the caller keeps the reservation.
func (c *Conductor) runOnWorker(t *task, fn func(ctx context.Context)) bool {
	if !c.running.Load() || c.busy.Load() >= int64(c.opts.Workers) {
		return false
	}
	// A worker is free, or about to be: between two jobs it is not yet
	// receiving, so the hand-over waits for it, briefly.
	wait := time.NewTimer(handOffWait)
	defer wait.Stop()
	select {
	case c.handoff <- job{uuid: t.uuid(), run: fn}:
		return true
	case <-wait.C:
		return false
	case <-c.stopCh:
		return false
	}
}

// handOffWait bounds how long runOnWorker waits for a free worker to
// take the work.
const handOffWait = time.Second

// vmediaSchemes are the image URL schemes Ironic accepts for virtual media
// (image_publisher.VMEDIA_SUPPORTED_URL_SCHEMES).
var vmediaSchemes = []string{"http", "https", "nfs", "cifs", "smb"}

// VirtualMediaOptions tune AttachVirtualMedia.
type VirtualMediaOptions struct {
	// DownloadSource is Ironic's image_download_source: "local" (the
	// default), "http" or "swift". Anvil has no image cache to publish
	// from, so the BMC always fetches the image from its URL (what Ironic
	// does for "http"); "local" is refused for nfs, cifs and smb URLs, as
	// Ironic refuses it.
	DownloadSource string
}

// AttachVirtualMedia inserts the image at imageURL into the node's
// virtual media device deviceType (disk, cdrom or floppy), through its
// management interface's VirtualMediaManager capability, as Ironic's
// conductor does: under the node's reservation it checks the device,
// the URL and the management interface (its validation and the
// capability) and returns; a worker then attaches the image with the
// reservation handed over, and a failure lands in the node's last_error
// and history. The URL must be http, https, nfs, cifs or smb and carry
// no password (it would land where responses show it). A node in
// maintenance after a power failure is refused, as Ironic does. A
// management interface without the capability (and every driver behind
// a plugin) fails with a *driver.UnsupportedError; no free worker is a
// *NoFreeWorkerError.
func (c *Conductor) AttachVirtualMedia(ctx context.Context, ident, deviceType, imageURL string, o VirtualMediaOptions) error {
	dev := driver.VirtualMediaDevice(deviceType)
	if !dev.Valid() {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "device_type", Expected: fmt.Sprintf("one of %v", driver.VirtualMediaDevices())}
	}
	if err := checkVirtualMediaURL(ident, imageURL, o.DownloadSource); err != nil {
		return err
	}
	t, err := c.exclusive(ctx, ident)
	if err != nil {
		return err
	}
	handed := false
	defer func() {
		if !handed {
			t.release()
		}
	}()
	if err := refuseAfterPowerFailure(t, "attach virtual media"); err != nil {
		return err
	}
	const op = "attach virtual media"
	if err := syncCall(ctx, t, false, driver.KindManagement, op, func(m driver.ManagementInterface, v *driver.Task) error {
		if _, err := virtualMediaOf(t, m, v, op); err != nil {
			return err
		}
		return m.Validate(ctx, v)
	}); err != nil {
		return err
	}
	if !c.runOnWorker(t, func(ctx context.Context) {
		err := syncCall(ctx, t, true, driver.KindManagement, op, func(m driver.ManagementInterface, v *driver.Task) error {
			vm, err := virtualMediaOf(t, m, v, op)
			if err != nil {
				return err
			}
			return vm.AttachVirtualMedia(ctx, v, dev, imageURL)
		})
		if err == nil {
			return
		}
		msg := fmt.Sprintf("Could not attach device %s to node %s: %s", dev, t.uuid(), describeErr(err))
		t.node.LastError = msg
		if serr := t.save(ctx); serr != nil {
			c.log.Warn("cannot record a virtual media failure", "node", t.uuid(), "error", serr)
		}
		c.history(ctx, t.uuid(), "attach virtual media failed", "vmedia", msg, baremetal.HistoryError)
	}) {
		return &NoFreeWorkerError{Node: t.uuid(), Operation: op, Host: c.host}
	}
	handed = true
	return nil
}

// DetachVirtualMedia ejects the node's virtual media devices deviceTypes
// (every device when empty), as AttachVirtualMedia attaches them.
func (c *Conductor) DetachVirtualMedia(ctx context.Context, ident string, deviceTypes []string) error {
	devs := make([]driver.VirtualMediaDevice, 0, len(deviceTypes))
	for _, s := range deviceTypes {
		d := driver.VirtualMediaDevice(s)
		if !d.Valid() {
			return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "device_types", Expected: fmt.Sprintf("each one of %v", driver.VirtualMediaDevices())}
		}
		if !slices.Contains(devs, d) {
			devs = append(devs, d)
		}
	}
	t, err := c.exclusive(ctx, ident)
	if err != nil {
		return err
	}
	defer t.release()
	if err := refuseAfterPowerFailure(t, "detach virtual media"); err != nil {
		return err
	}
	return syncCall(ctx, t, true, driver.KindManagement, "detach virtual media", func(m driver.ManagementInterface, v *driver.Task) error {
		vm, err := virtualMediaOf(t, m, v, "detach virtual media")
		if err != nil {
			return err
		}
		if err := m.Validate(ctx, v); err != nil {
			return err
		}
		return vm.DetachVirtualMedia(ctx, v, devs)
	})
}

// VirtualMediaState lists the node's virtual media devices and what they
// hold, after the management interface's validation. It reads the node
// without reserving it (Ironic's shared lock).
func (c *Conductor) VirtualMediaState(ctx context.Context, ident string) ([]driver.VirtualMedia, error) {
	t, err := c.shared(ctx, ident)
	if err != nil {
		return nil, err
	}
	t.noPorts = true
	var out []driver.VirtualMedia
	err = syncCall(ctx, t, false, driver.KindManagement, "get virtual media", func(m driver.ManagementInterface, v *driver.Task) error {
		vm, err := virtualMediaOf(t, m, v, "get virtual media")
		if err != nil {
			return err
		}
		if err := m.Validate(ctx, v); err != nil {
			return err
		}
		out, err = vm.VirtualMedia(ctx, v)
		return err
	})
	return out, err
}

func virtualMediaOf(t *task, m driver.ManagementInterface, v *driver.Task, op string) (driver.VirtualMediaManager, error) {
	vm, ok := driver.As[driver.VirtualMediaManager](m)
	if !ok {
		return nil, &driver.UnsupportedError{Node: t.uuid(), Kind: driver.KindManagement, Impl: v.Interfaces[driver.KindManagement], Operation: op}
	}
	return vm, nil
}

// refuseAfterPowerFailure refuses op on a node in maintenance for a power
// failure, as Ironic's attach and detach of virtual media do.
func refuseAfterPowerFailure(t *task, op string) error {
	if t.node.Maintenance && t.node.Fault == "power failure" {
		return &VerbError{Verb: op, Node: t.uuid(), State: t.node.ProvisionState,
			Reason: "the node is in maintenance after a power failure; retry once its power is recovered"}
	}
	return nil
}

// checkVirtualMediaURL checks an image URL for AttachVirtualMedia.
func checkVirtualMediaURL(ident, raw, source string) error {
	switch source {
	case "", "local", "http", "swift":
	default:
		return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "image_download_source", Expected: `"local", "http" or "swift"`}
	}
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "image_url", Expected: "an absolute URL"}
	}
	scheme := strings.ToLower(u.Scheme)
	if !slices.Contains(vmediaSchemes, scheme) || u.Host == "" {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "image_url", Expected: fmt.Sprintf("an absolute URL with one of the schemes %v", vmediaSchemes)}
	}
	if _, has := u.User.Password(); has {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "image_url", Expected: "a URL without a password in it"}
	}
	if (source == "" || source == "local") && scheme != "http" && scheme != "https" {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "image_download_source",
			Expected: fmt.Sprintf(`"http" for a %s URL, which the conductor cannot download`, scheme)}
	}
	return nil
}
