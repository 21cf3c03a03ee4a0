package rfdriver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stmcginnis/gofish/redfish"

	"github.com/anvilmetal/anvil/driver"
)

// PowerImpl is the "redfish" power interface.
type PowerImpl struct{ base }

// Power returns the "redfish" power interface.
func (d *Drivers) Power() *PowerImpl { return &PowerImpl{base{d, driver.KindPower, ImplRedfish}} }

// GetPowerState maps the system's PowerState (PoweringOn counts as on,
// PoweringOff as off, as Ironic does).
func (p *PowerImpl) GetPowerState(ctx context.Context, t *driver.Task) (driver.PowerState, error) {
	sys, err := p.system(ctx, t)
	if err != nil {
		return driver.PowerError, err
	}
	ps, err := sys.PowerState()
	if err != nil {
		return driver.PowerError, p.wrap(t, "read power state", err)
	}
	switch ps {
	case "On", "PoweringOn":
		return driver.PowerOn, nil
	case "Off", "PoweringOff":
		return driver.PowerOff, nil
	}
	return driver.PowerError, p.wrap(t, "read power state", fmt.Errorf("unexpected PowerState %q", ps))
}

// SetPowerState drives the system to target with the reset types it
// advertises and waits until the state is reached.
func (p *PowerImpl) SetPowerState(ctx context.Context, t *driver.Task, target driver.PowerState, timeout time.Duration) error {
	sys, err := p.system(ctx, t)
	if err != nil {
		return err
	}
	var resets []string
	want := "On"
	switch target {
	case driver.PowerOn:
		resets = []string{"On", "ForceOn"}
	case driver.PowerOff:
		resets, want = []string{"ForceOff"}, "Off"
	case driver.SoftPowerOff:
		resets, want = []string{"GracefulShutdown"}, "Off"
	case driver.Reboot, driver.SoftReboot:
		cur, err := sys.PowerState()
		if err != nil {
			return p.wrap(t, "read power state", err)
		}
		switch {
		case cur != "On":
			resets = []string{"On", "ForceOn"}
		case target == driver.Reboot:
			resets = []string{"ForceRestart"}
		default:
			resets = []string{"GracefulRestart"}
		}
	default:
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: p.kind, Impl: p.name, Field: "target", Key: "power_state", Expected: "power on, power off, soft power off, rebooting or soft rebooting"}
	}
	if _, err := sys.Reset(resets...); err != nil {
		return p.wrap(t, "set power "+string(target), err)
	}
	return p.waitPower(ctx, t, sys, want, timeout)
}

// Reboot power-cycles the node and leaves it on.
func (p *PowerImpl) Reboot(ctx context.Context, t *driver.Task, timeout time.Duration) error {
	return p.SetPowerState(ctx, t, driver.Reboot, timeout)
}

// Redfish boot targets for Ironic's boot devices, and back.
var (
	toTarget = map[driver.BootDevice]string{
		driver.BootPXE: "Pxe", driver.BootDisk: "Hdd", driver.BootCDROM: "Cd",
		driver.BootBIOS: "BiosSetup", driver.BootUEFIHTTP: "UefiHttp",
	}
	fromTarget = map[string]driver.BootDevice{
		"Pxe": driver.BootPXE, "Hdd": driver.BootDisk, "Cd": driver.BootCDROM,
		"BiosSetup": driver.BootBIOS, "UefiHttp": driver.BootUEFIHTTP,
	}
)

// ManagementImpl is the "redfish" management interface. Beyond the boot
// device it manages boot mode (driver.BootModeManager), secure boot, the
// indicator LED, NMI injection and virtual media
// (driver.VirtualMediaManager).
type ManagementImpl struct{ base }

// Management returns the "redfish" management interface.
func (d *Drivers) Management() *ManagementImpl {
	return &ManagementImpl{base{d, driver.KindManagement, ImplRedfish}}
}

// SupportedBootDevices lists the Ironic boot devices among the targets
// the system advertises (all known ones when it advertises none).
func (m *ManagementImpl) SupportedBootDevices(ctx context.Context, t *driver.Task) ([]driver.BootDevice, error) {
	sys, err := m.system(ctx, t)
	if err != nil {
		return nil, err
	}
	b, err := sys.Boot()
	if err != nil {
		return nil, m.wrap(t, "read boot override", err)
	}
	var out []driver.BootDevice
	for _, dev := range []driver.BootDevice{driver.BootPXE, driver.BootDisk, driver.BootCDROM, driver.BootBIOS, driver.BootUEFIHTTP} {
		if len(b.Allowed) == 0 || slices.Contains(b.Allowed, toTarget[dev]) {
			out = append(out, dev)
		}
	}
	return out, nil
}

// SetBootDevice sets the boot override: Once, or Continuous when
// persistent.
func (m *ManagementImpl) SetBootDevice(ctx context.Context, t *driver.Task, device driver.BootDevice, persistent bool) error {
	target, ok := toTarget[device]
	if !ok {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: m.kind, Impl: m.name, Field: "args", Key: "boot_device", Expected: "one of pxe, disk, cdrom, bios, uefi-http"}
	}
	sys, err := m.system(ctx, t)
	if err != nil {
		return err
	}
	enabled := "Once"
	if persistent {
		enabled = "Continuous"
	}
	return m.wrap(t, "set boot device "+string(device), sys.SetBoot(target, enabled, ""))
}

// GetBootDevice reads the boot override back. With no override the
// device is empty.
func (m *ManagementImpl) GetBootDevice(ctx context.Context, t *driver.Task) (driver.BootDeviceState, error) {
	sys, err := m.system(ctx, t)
	if err != nil {
		return driver.BootDeviceState{}, err
	}
	b, err := sys.Boot()
	if err != nil {
		return driver.BootDeviceState{}, m.wrap(t, "read boot override", err)
	}
	if b.Enabled == "Disabled" || b.Enabled == "" {
		return driver.BootDeviceState{}, nil
	}
	persistent := b.Enabled == "Continuous"
	return driver.BootDeviceState{Device: fromTarget[b.Target], Persistent: &persistent}, nil
}

// GetBootMode reads the boot override mode.
func (m *ManagementImpl) GetBootMode(ctx context.Context, t *driver.Task) (driver.BootMode, error) {
	sys, err := m.system(ctx, t)
	if err != nil {
		return "", err
	}
	b, err := sys.Boot()
	if err != nil {
		return "", m.wrap(t, "read boot mode", err)
	}
	switch b.Mode {
	case "UEFI":
		return driver.BootModeUEFI, nil
	case "Legacy":
		return driver.BootModeBIOS, nil
	}
	return "", m.unsupported("get_boot_mode")
}

// SetBootMode sets the boot override mode.
func (m *ManagementImpl) SetBootMode(ctx context.Context, t *driver.Task, mode driver.BootMode) error {
	sys, err := m.system(ctx, t)
	if err != nil {
		return err
	}
	rm := map[driver.BootMode]string{driver.BootModeUEFI: "UEFI", driver.BootModeBIOS: "Legacy"}[mode]
	if rm == "" {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: m.kind, Impl: m.name, Field: "args", Key: "boot_mode", Expected: "uefi or bios"}
	}
	return m.wrap(t, "set boot mode", sys.SetBoot("", "", rm))
}

// InjectNMI sends a diagnostic interrupt (Reset type Nmi).
func (m *ManagementImpl) InjectNMI(ctx context.Context, t *driver.Task) error {
	sys, err := m.system(ctx, t)
	if err != nil {
		return err
	}
	_, err = sys.Reset("Nmi")
	if errors.Is(err, ErrUnsupported) {
		return m.capErr(t, "inject_nmi", err)
	}
	return m.wrap(t, "inject nmi", err)
}

// GetSecureBoot reports whether UEFI secure boot is enabled.
func (m *ManagementImpl) GetSecureBoot(ctx context.Context, t *driver.Task) (bool, error) {
	sys, err := m.system(ctx, t)
	if err != nil {
		return false, err
	}
	sb, err := sys.SecureBoot()
	if err != nil {
		return false, m.wrap(t, "read secure boot", err)
	}
	return sb.SecureBootEnable, nil
}

// SetSecureBoot enables or disables UEFI secure boot.
func (m *ManagementImpl) SetSecureBoot(ctx context.Context, t *driver.Task, enabled bool) error {
	sys, err := m.system(ctx, t)
	if err != nil {
		return err
	}
	return m.wrap(t, "set secure boot", sys.SetSecureBoot(enabled))
}

// GetIndicator reads the indicator LED: Lit, Blinking or Off.
func (m *ManagementImpl) GetIndicator(ctx context.Context, t *driver.Task) (string, error) {
	sys, err := m.system(ctx, t)
	if err != nil {
		return "", err
	}
	v, err := sys.Indicator()
	return v, m.wrap(t, "read indicator", err)
}

// SetIndicator sets the indicator LED to Lit, Blinking or Off.
func (m *ManagementImpl) SetIndicator(ctx context.Context, t *driver.Task, state string) error {
	if state != "Lit" && state != "Blinking" && state != "Off" {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: m.kind, Impl: m.name, Field: "args", Key: "state", Expected: "Lit, Blinking or Off"}
	}
	sys, err := m.system(ctx, t)
	if err != nil {
		return err
	}
	return m.wrap(t, "set indicator", sys.SetIndicator(state))
}

// vmediaTypes are the Redfish media types of the devices each Ironic
// virtual media device type goes into, as Ironic's redfish management
// maps them (a DVD-only device takes a CD image).
var vmediaTypes = map[driver.VirtualMediaDevice][]redfish.VirtualMediaType{
	driver.VirtualMediaCDROM:  {redfish.CDMediaType, redfish.DVDMediaType},
	driver.VirtualMediaDisk:   {redfish.USBStickMediaType},
	driver.VirtualMediaFloppy: {redfish.FloppyMediaType},
}

// AttachVirtualMedia inserts imageURL into the system's first device of
// device's media types (driver.VirtualMediaManager), ejecting what it
// held.
func (m *ManagementImpl) AttachVirtualMedia(ctx context.Context, t *driver.Task, device driver.VirtualMediaDevice, imageURL string) error {
	types, ok := vmediaTypes[device]
	if !ok {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: m.kind, Impl: m.name, Field: "args", Key: "device_type", Expected: "disk, cdrom or floppy"}
	}
	sys, err := m.system(ctx, t)
	if err != nil {
		return err
	}
	_, err = sys.InsertTyped(imageURL, types...)
	return m.capErr(t, "attach_virtual_media", err)
}

// DetachVirtualMedia ejects the devices of the given types, every device
// when devices is empty.
func (m *ManagementImpl) DetachVirtualMedia(ctx context.Context, t *driver.Task, devices []driver.VirtualMediaDevice) error {
	var types []redfish.VirtualMediaType
	for _, d := range devices {
		ts, ok := vmediaTypes[d]
		if !ok {
			return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: m.kind, Impl: m.name, Field: "args", Key: "device_types", Expected: "each disk, cdrom or floppy"}
		}
		types = append(types, ts...)
	}
	sys, err := m.system(ctx, t)
	if err != nil {
		return err
	}
	return m.capErr(t, "detach_virtual_media", sys.EjectTyped(types...))
}

// VirtualMedia lists the system's virtual media devices, as Ironic's
// redfish get_virtual_media: media types, whether inserted, the image.
func (m *ManagementImpl) VirtualMedia(ctx context.Context, t *driver.Task) ([]driver.VirtualMedia, error) {
	sys, err := m.system(ctx, t)
	if err != nil {
		return nil, err
	}
	all, err := sys.VirtualMedia()
	if err != nil {
		return nil, m.capErr(t, "get_virtual_media", err)
	}
	slices.SortFunc(all, func(a, b *redfish.VirtualMedia) int { return strings.Compare(a.ODataID, b.ODataID) })
	out := make([]driver.VirtualMedia, 0, len(all))
	for _, vm := range all {
		types := make([]string, 0, len(vm.MediaTypes))
		for _, mt := range vm.MediaTypes {
			types = append(types, string(mt))
		}
		out = append(out, driver.VirtualMedia{MediaTypes: types, Inserted: vm.Inserted, Image: vm.Image})
	}
	return out, nil
}

// capErr wraps err from an optional capability: what the BMC does not
// offer becomes a *driver.UnsupportedError (keeping the BMC's detail in
// the message), anything else is wrapped as usual.
func (m *ManagementImpl) capErr(t *driver.Task, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUnsupported) {
		return fmt.Errorf("%w: node %s: %w", m.unsupported(op), t.NodeUUID, err)
	}
	return m.wrap(t, op, err)
}

// GetIndicatorState reads the system's indicator (driver.IndicatorManager):
// IndicatorLED Lit, Blinking or Off, or LocationIndicatorActive on newer
// services.
func (m *ManagementImpl) GetIndicatorState(ctx context.Context, t *driver.Task) (driver.IndicatorState, error) {
	sys, err := m.system(ctx, t)
	if err != nil {
		return "", err
	}
	v, err := sys.Indicator()
	if err != nil {
		return "", m.capErr(t, "get_indicator_state", err)
	}
	switch v {
	case "Lit":
		return driver.IndicatorOn, nil
	case "Blinking":
		return driver.IndicatorBlinking, nil
	case "Off":
		return driver.IndicatorOff, nil
	}
	return driver.IndicatorUnknown, nil
}

// SetIndicatorState sets the system's indicator (driver.IndicatorManager).
// A service that has only LocationIndicatorActive cannot blink.
func (m *ManagementImpl) SetIndicatorState(ctx context.Context, t *driver.Task, state driver.IndicatorState) error {
	led := map[driver.IndicatorState]string{driver.IndicatorOn: "Lit", driver.IndicatorBlinking: "Blinking", driver.IndicatorOff: "Off"}[state]
	if led == "" {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: m.kind, Impl: m.name, Field: "args", Key: "state", Expected: "on, off or blinking, got " + strconv.Quote(string(state))}
	}
	sys, err := m.system(ctx, t)
	if err != nil {
		return err
	}
	return m.capErr(t, "set_indicator_state", sys.SetIndicator(led))
}

// Health reads the node's hardware health (driver.HealthReader): the
// worse of the ComputerSystem's Status.Health and Status.HealthRollup.
// Ironic reads Health alone; a BMC that reports a failed fan or power
// supply in a subsystem often keeps the system's own Health at OK and
// reports the failure in HealthRollup, which is what an operator means
// by the node's health. A service that reports neither gives
// driver.HealthUnknown; a value outside Redfish's three is ignored.
func (m *ManagementImpl) Health(ctx context.Context, t *driver.Task) (driver.Health, error) {
	sys, err := m.system(ctx, t)
	if err != nil {
		return driver.HealthUnknown, err
	}
	h, rollup, err := sys.Health()
	if err != nil {
		return driver.HealthUnknown, m.wrap(t, "get_node_health", err)
	}
	return redfishHealth(h).Worse(redfishHealth(rollup)), nil
}

// redfishHealth maps a Redfish Status health to Ironic's (the same three
// words); anything else is unknown.
func redfishHealth(s string) driver.Health {
	switch h := driver.Health(s); h {
	case driver.HealthOK, driver.HealthWarning, driver.HealthCritical:
		return h
	}
	return driver.HealthUnknown
}

// GetSecureBootState reports whether UEFI secure boot is enabled
// (driver.SecureBootManager).
func (m *ManagementImpl) GetSecureBootState(ctx context.Context, t *driver.Task) (bool, error) {
	sys, err := m.system(ctx, t)
	if err != nil {
		return false, err
	}
	sb, err := sys.SecureBoot()
	if err != nil {
		return false, m.capErr(t, "get_secure_boot_state", err)
	}
	return sb.SecureBootEnable, nil
}

// SetSecureBootState enables or disables UEFI secure boot
// (driver.SecureBootManager).
func (m *ManagementImpl) SetSecureBootState(ctx context.Context, t *driver.Task, enabled bool) error {
	sys, err := m.system(ctx, t)
	if err != nil {
		return err
	}
	return m.capErr(t, "set_secure_boot_state", sys.SetSecureBoot(enabled))
}

// VirtualMediaBoot is the "redfish-virtual-media" boot interface: it
// boots the deploy ISO named in driver_info from a virtual CD.
type VirtualMediaBoot struct{ base }

// VirtualMediaBoot returns the "redfish-virtual-media" boot interface.
func (d *Drivers) VirtualMediaBoot() *VirtualMediaBoot {
	return &VirtualMediaBoot{base{d, driver.KindBoot, ImplVirtualMedia}}
}

// Properties adds the ISO properties to the redfish ones.
func (v *VirtualMediaBoot) Properties() []driver.Property {
	return append(v.properties(),
		driver.Property{Name: "redfish_deploy_iso", Description: "The bootable ramdisk ISO for deploy, cleaning, inspection and rescue: an http(s) URL, or with a media store also a local path or file:// URL. With a media store it is fetched (bounded in size and time, cached by URL) and re-mastered into a per-node ISO whose grub.cfg and isolinux.cfg kernel lines carry the node's ramdisk parameters; without one it is inserted as it is. Required (or deploy_iso, or deploy_kernel and deploy_ramdisk).", Required: false},
		driver.Property{Name: "deploy_iso", Description: "Same as redfish_deploy_iso; used when that is unset.", Required: false},
		driver.Property{Name: "deploy_kernel", Description: "With deploy_ramdisk and no deploy ISO: the ramdisk's kernel (an http(s) URL, a local path or a file:// URL) that the boot ISO is built from, with ISOLINUX for BIOS and GRUB for UEFI and the node's ramdisk parameters on its kernel lines, as Ironic does (needs a media store; cached by its inputs).", Required: false},
		driver.Property{Name: "deploy_ramdisk", Description: "With deploy_kernel: the ramdisk (initramfs) of the boot ISO built from them.", Required: false},
		driver.Property{Name: "kernel_append_params", Description: "Extra ramdisk kernel parameters (whitespace separated), put before the conductor's parameters on the kernel lines of the per-node ISO (needs a media store). Optional.", Required: false},
		driver.Property{Name: "config_via_removable", Description: "Also pass the ramdisk parameters in parameters.txt on an ir-vfd-dev image in the virtual USB stick or floppy (and boot_method=vmedia on the kernel line, so IPA reads it), as Ironic does. Default false: the per-node ISO carries them. Optional.", Required: false},
	)
}

// deploySource is what a node's ramdisk boots from: a deploy ISO (key
// and ref), or a kernel and a ramdisk to build one from.
type deploySource struct {
	key, ref        string
	kernel, ramdisk bootISOSource
}

// isoRef returns the deploy ISO reference and the driver_info key that
// named it, or else, as Ironic does, the driver_info deploy_kernel and
// deploy_ramdisk to build the boot ISO from. A local path (or file://
// URL) is accepted only with a media store, which republishes it for
// the BMC, and a kernel and ramdisk only with one (the ISO built from
// them is published there).
func (v *VirtualMediaBoot) isoRef(t *driver.Task) (deploySource, error) {
	for _, k := range []string{"redfish_deploy_iso", "deploy_iso"} {
		if s, ok := t.DriverInfoString(k); ok {
			if err := v.checkRef(t, "driver_info", k, s, "an ISO image"); err != nil {
				return deploySource{}, err
			}
			return deploySource{key: k, ref: s}, nil
		}
	}
	kernel, hasKernel := t.DriverInfoString("deploy_kernel")
	ramdisk, hasRamdisk := t.DriverInfoString("deploy_ramdisk")
	switch {
	case !hasKernel && !hasRamdisk:
		return deploySource{}, &driver.MissingParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: "driver_info", Missing: []string{"redfish_deploy_iso"}}
	case !hasKernel:
		return deploySource{}, &driver.MissingParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: "driver_info", Missing: []string{"deploy_kernel"}}
	case !hasRamdisk:
		return deploySource{}, &driver.MissingParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: "driver_info", Missing: []string{"deploy_ramdisk"}}
	}
	src := deploySource{kernel: bootISOSource{"deploy_kernel", kernel, ""}, ramdisk: bootISOSource{"deploy_ramdisk", ramdisk, ""}}
	if err := v.checkBuild(t, "driver_info", src.kernel, src.ramdisk); err != nil {
		return deploySource{}, err
	}
	return src, nil
}

// checkRef checks an image reference: an http(s) URL, or with a media
// store also an absolute path or a file:// URL.
func (v *VirtualMediaBoot) checkRef(t *driver.Task, field, key, ref, what string) error {
	web := strings.HasPrefix(ref, "http://") || strings.HasPrefix(ref, "https://")
	if web || (v.d.opts.Media != nil && localPath(ref) != "") {
		return nil
	}
	exp := "an http(s) URL of " + what
	if v.d.opts.Media != nil {
		exp = "an http(s) URL, an absolute path or a file:// URL of " + what
	}
	return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: field, Key: key, Expected: exp}
}

// checkBuild checks that a boot ISO can be built from kernel and
// ramdisk: their references, a media store to publish it and a boot
// loader to build it with.
func (v *VirtualMediaBoot) checkBuild(t *driver.Task, field string, kernel, ramdisk bootISOSource) error {
	if v.d.opts.Media == nil {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: field, Key: kernel.key,
			Expected: "a media store to publish the boot ISO built from " + kernel.key + " and " + ramdisk.key +
				" (anvild's [deploy]http_root and http_url), or a deploy ISO (redfish_deploy_iso)"}
	}
	if l := v.d.opts.BootLoaders; !l.BIOS() && !l.UEFI() {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: field, Key: kernel.key,
			Expected: "a boot loader on the conductor to build the boot ISO with (Debian packages isolinux, syslinux-common, grub-efi-amd64-bin), or a deploy ISO (redfish_deploy_iso)"}
	}
	if err := v.checkRef(t, field, kernel.key, kernel.ref, "a kernel"); err != nil {
		return err
	}
	return v.checkRef(t, field, ramdisk.key, ramdisk.ref, "a ramdisk")
}

// appendParams returns driver_info kernel_append_params, or
// Options.KernelAppendParams, as words.
func (v *VirtualMediaBoot) appendParams(t *driver.Task) []string {
	if kp, ok := t.DriverInfoString("kernel_append_params"); ok {
		return strings.Fields(kp)
	}
	return strings.Fields(v.d.opts.KernelAppendParams)
}

// viaRemovable reads driver_info config_via_removable.
func (v *VirtualMediaBoot) viaRemovable(t *driver.Task) (bool, error) {
	raw, ok := t.DriverInfo["config_via_removable"]
	if !ok || raw == nil {
		return false, nil
	}
	b, err := strconv.ParseBool(fmt.Sprint(raw))
	if err != nil {
		return false, &driver.InvalidParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: "driver_info", Key: "config_via_removable", Expected: "a boolean"}
	}
	return b, nil
}

// Validate checks the redfish driver_info, the deploy ISO reference and
// config_via_removable.
func (v *VirtualMediaBoot) Validate(ctx context.Context, t *driver.Task) error {
	if err := v.base.Validate(ctx, t); err != nil {
		return err
	}
	if _, err := v.isoRef(t); err != nil {
		return err
	}
	_, err := v.viaRemovable(t)
	return err
}

// vmediaParamsKey records, while the node's parameters image is
// inserted, the URL it was published at.
const vmediaParamsKey = "redfish_vmedia_params_image"

// vmediaBootISOKey records, while the node's re-mastered boot ISO is
// published, the URL it was published at.
const vmediaBootISOKey = "redfish_vmedia_boot_iso"

// agentTokenParam is IPA's kernel parameter for a pre-generated agent
// token. Anvil's conductor never pre-generates one (the agent gets its
// token at its first lookup), and a token must never be on a kernel
// command line: anyone who can fetch the published ISO or read
// /proc/cmdline would have it.
const agentTokenParam = "ipa-agent-token"

// paramsImageName is the node's parameters image name in the media store.
func paramsImageName(node string) string { return node + "-" + ParamsLabel + ".iso" }

// bootISOName is the node's re-mastered boot ISO name in the media store.
func bootISOName(node string) string { return node + "-boot.iso" }

// kernelArgs renders the kernel parameters the per-node ISO appends to
// each kernel line, in Ironic's order: driver_info kernel_append_params
// first, then the conductor's parameters sorted by key (boot_method=vmedia
// first when the parameters image is also inserted).
func kernelArgs(params map[string]any, appendParams []string, viaRemovable bool) (string, error) {
	text, err := paramsText(params, nil)
	if err != nil {
		return "", err
	}
	conductor := strings.Fields(text)
	if !viaRemovable {
		conductor = conductor[1:] // The leading boot_method=vmedia.
	}
	all := append(append([]string{}, appendParams...), conductor...)
	for _, a := range all {
		if strings.ContainsAny(a, configMeta) {
			return "", fmt.Errorf("kernel parameter %q cannot be written into a boot loader configuration (none of %s)", a, configMeta)
		}
	}
	return strings.Join(all, " "), nil
}

// configMeta are the characters that grub or isolinux would interpret in
// a kernel line (quoting, variables, command separators), so a parameter
// with one could change the boot configuration instead of reaching the
// kernel.
const configMeta = "\"'$;`\\{}|&<>#"

// PrepareRamdisk readies a ramdisk boot from virtual media, as Ironic's
// redfish-virtual-media does with a per-node boot ISO. With
// Options.Media, the deploy ISO (driver_info redfish_deploy_iso or
// deploy_iso) is fetched, bounded by Options.MaxDeployISOSize and
// Options.DeployISOFetchTimeout and cached by URL, and re-mastered
// (Remaster) into an ISO whose grub.cfg and isolinux.cfg kernel lines end
// with kernel_append_params and the conductor's parameters (ipa-api-url,
// ipa-inspection-callback-url, ...): a stock IPA ISO reads them from
// /proc/cmdline. That ISO is published through Options.Media and goes
// into the virtual CD. With driver_info config_via_removable the
// parameters also go to parameters.txt on an ISO 9660 image labelled
// ir-vfd-dev in the virtual USB stick or floppy, with boot_method=vmedia
// on the kernel line so IPA reads it; by default that image is not made,
// since the kernel line carries everything and many BMCs have no second
// virtual device. The boot interface itself then sets a one-time boot
// from CD: the boot device is this interface's decision. Without
// Options.Media the deploy ISO is inserted as it is (logged when there
// were parameters): the ISO must then carry them. The agent token is
// refused as a parameter (agentTokenParam). A failure removes what was
// published and leaves the node's media as they were.
func (v *VirtualMediaBoot) PrepareRamdisk(ctx context.Context, t *driver.Task, params map[string]any) error {
	src, err := v.isoRef(t)
	if err != nil {
		return err
	}
	removable, err := v.viaRemovable(t)
	if err != nil {
		return err
	}
	if _, ok := params[agentTokenParam]; ok {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: "ramdisk parameters", Key: agentTokenParam,
			Expected: "no agent token: it is never put on a kernel command line or virtual media (the agent gets it at lookup)"}
	}
	extra := v.appendParams(t)
	args, err := kernelArgs(params, extra, removable)
	if err != nil {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: "ramdisk parameters", Key: "params", Expected: err.Error()}
	}
	sys, err := v.system(ctx, t)
	if err != nil {
		return err
	}
	media := v.d.opts.Media
	if media == nil {
		if len(params) > 0 {
			v.d.opts.Logger.Warn("redfish: no media store configured: the deploy ISO is inserted as it is and must carry the ramdisk parameters itself",
				"node", t.NodeUUID, "parameters", len(params))
		}
		if _, err := sys.InsertCD(src.ref); err != nil {
			return v.wrap(t, "insert deploy ISO", err)
		}
		if err := sys.SetBoot("Cd", "Once", ""); err != nil {
			return v.wrap(t, "set one-time boot from CD", err)
		}
		t.SetDriverInternalInfo("redfish_vmedia_inserted", true)
		return nil
	}
	// What this call published is withdrawn again if a later step fails.
	var undo []func()
	fail := func(err error) error {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return err
	}
	var bootURL string
	if src.ref != "" {
		bootURL, err = v.publishBootISO(ctx, t, src.key, src.ref, args)
	} else {
		bootURL, err = v.publishBuiltISO(ctx, t, bootISOName(t.NodeUUID), src.kernel, src.ramdisk, args)
	}
	if err != nil {
		return err
	}
	undo = append(undo, func() { _ = media.Delete(context.WithoutCancel(ctx), bootISOName(t.NodeUUID)) })
	var paramsURL string
	if removable {
		text, err := paramsText(params, extra)
		if err != nil {
			return fail(&driver.InvalidParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: "ramdisk parameters", Key: "params", Expected: err.Error()})
		}
		img, err := paramsImage(text)
		if err != nil {
			return fail(v.wrap(t, "build ramdisk parameters image", err))
		}
		paramsURL, err = media.Put(ctx, paramsImageName(t.NodeUUID), bytes.NewReader(img))
		if err != nil {
			return fail(v.wrap(t, "publish ramdisk parameters image", err))
		}
		undo = append(undo, func() { _ = media.Delete(context.WithoutCancel(ctx), paramsImageName(t.NodeUUID)) })
		if _, err := sys.InsertRemovable(paramsURL); err != nil {
			return fail(v.wrap(t, "insert ramdisk parameters image", err))
		}
		undo = append(undo, func() { _ = sys.EjectImage(paramsURL) })
	}
	if _, err := sys.InsertCD(bootURL); err != nil {
		return fail(v.wrap(t, "insert the node's boot ISO", err))
	}
	undo = append(undo, func() { _ = sys.EjectCD() })
	if err := sys.SetBoot("Cd", "Once", ""); err != nil {
		return fail(v.wrap(t, "set one-time boot from CD", err))
	}
	t.SetDriverInternalInfo(vmediaBootISOKey, bootURL)
	if paramsURL != "" {
		t.SetDriverInternalInfo(vmediaParamsKey, paramsURL)
	}
	t.SetDriverInternalInfo("redfish_vmedia_inserted", true)
	return nil
}

// publishBootISO fetches the deploy ISO ref, re-masters it with args and
// publishes the result as the node's boot ISO, returning its URL.
func (v *VirtualMediaBoot) publishBootISO(ctx context.Context, t *driver.Task, key, ref, args string) (string, error) {
	src, size, sum, err := v.d.isos.open(ctx, t.NodeUUID, key, ref)
	if err != nil {
		var tl *DeployISOTooLargeError
		if errors.As(err, &tl) {
			return "", err
		}
		return "", v.wrap(t, "fetch the deploy ISO", err)
	}
	defer src.Close()
	dir, err := v.d.isos.scratch()
	if err != nil {
		return "", v.wrap(t, "re-master the deploy ISO", err)
	}
	work, err := os.MkdirTemp(dir, "remaster-")
	if err != nil {
		return "", v.wrap(t, "re-master the deploy ISO", err)
	}
	defer os.RemoveAll(work)
	out, err := os.Create(filepath.Join(work, "boot.iso"))
	if err != nil {
		return "", v.wrap(t, "re-master the deploy ISO", err)
	}
	defer out.Close()
	rep, err := Remaster(ctx, src, size, out, args, work)
	if err != nil {
		if errors.Is(err, ErrRemaster) {
			return "", &driver.InvalidParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: "driver_info", Key: key,
				Expected: "a bootable ISO with an El Torito boot catalog and a kernel line in its grub.cfg or isolinux.cfg (" + err.Error() + ")"}
		}
		return "", v.wrap(t, "re-master the deploy ISO", err)
	}
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		return "", v.wrap(t, "re-master the deploy ISO", err)
	}
	url, err := v.d.opts.Media.Put(ctx, bootISOName(t.NodeUUID), out)
	if err != nil {
		return "", v.wrap(t, "publish the node's boot ISO", err)
	}
	v.d.opts.Logger.Debug("redfish: deploy ISO re-mastered with the node's kernel parameters", "node", t.NodeUUID, "deploy_iso_sha256", sum,
		"configs", rep.Configs, "kernel_lines", rep.KernelLines, "boot_entries", len(rep.BootEntries))
	return url, nil
}

// publishBuiltISO publishes as name the boot ISO built from kernel and
// ramdisk with args (from the cache when it was built from the same
// inputs) and returns its URL.
func (v *VirtualMediaBoot) publishBuiltISO(ctx context.Context, t *driver.Task, name string, kernel, ramdisk bootISOSource, args string) (string, error) {
	start := time.Now()
	f, built, err := v.d.isos.builtISO(ctx, t.NodeUUID, kernel, ramdisk, args, v.d.opts.BootLoaders)
	if err != nil {
		var tl *DeployISOTooLargeError
		if errors.As(err, &tl) {
			return "", err
		}
		return "", v.wrap(t, "build the boot ISO from "+kernel.key+" and "+ramdisk.key, err)
	}
	defer f.Close()
	url, err := v.d.opts.Media.Put(ctx, name, f)
	if err != nil {
		return "", v.wrap(t, "publish the node's boot ISO", err)
	}
	v.d.opts.Logger.Debug("redfish: boot ISO built from a kernel and a ramdisk", "node", t.NodeUUID, "kernel", kernel.key, "ramdisk", ramdisk.key,
		"built_now", built, "seconds", time.Since(start).Seconds(), "bios", v.d.opts.BootLoaders.BIOS(), "uefi", v.d.opts.BootLoaders.UEFI())
	return url, nil
}

// CleanUpRamdisk ejects the virtual CD and the parameters image, and
// removes the node's boot ISO and parameters image from the media store.
func (v *VirtualMediaBoot) CleanUpRamdisk(ctx context.Context, t *driver.Task) error {
	sys, err := v.system(ctx, t)
	if err != nil {
		return err
	}
	if err := sys.EjectCD(); err != nil {
		return v.wrap(t, "eject virtual media", err)
	}
	if url, ok := t.DriverInternalInfo[vmediaBootISOKey].(string); ok && url != "" {
		if v.d.opts.Media != nil {
			if err := v.d.opts.Media.Delete(ctx, bootISOName(t.NodeUUID)); err != nil {
				return v.wrap(t, "remove the node's boot ISO", err)
			}
		}
		t.DeleteDriverInternalInfo(vmediaBootISOKey)
	}
	if url, ok := t.DriverInternalInfo[vmediaParamsKey].(string); ok && url != "" {
		if err := sys.EjectImage(url); err != nil {
			return v.wrap(t, "eject ramdisk parameters image", err)
		}
		if v.d.opts.Media != nil {
			if err := v.d.opts.Media.Delete(ctx, paramsImageName(t.NodeUUID)); err != nil {
				return v.wrap(t, "remove ramdisk parameters image", err)
			}
		}
		t.DeleteDriverInternalInfo(vmediaParamsKey)
	}
	t.DeleteDriverInternalInfo("redfish_vmedia_inserted")
	return nil
}

// RamdiskDeploy is the deploy interface whose instance is booted from
// virtual media (Ironic's "ramdisk": Metal3's live-ISO hosts).
const RamdiskDeploy = "ramdisk"

// instanceISOName is the node's instance ISO name in the media store.
func instanceISOName(node string) string { return node + "-instance.iso" }

// vmediaInstanceISOKey records, while the node's instance ISO (a
// ramdisk deploy's) is published, the URL it was published at.
const vmediaInstanceISOKey = "redfish_vmedia_instance_iso"

// PrepareInstance ejects the ramdisk and makes the node boot from disk
// persistently. For a ramdisk deploy (deploy interface "ramdisk") it
// boots the instance from the virtual CD instead, as Ironic does:
// instance_info boot_iso, inserted as it is (a local path or file://
// URL is published through the media store first), or an ISO built
// from instance_info kernel and ramdisk (BuildBootISO) with
// instance_info kernel_append_params (else driver_info's, else
// Options.KernelAppendParams) on its kernel lines; the boot device is
// the CD, persistently.
func (v *VirtualMediaBoot) PrepareInstance(ctx context.Context, t *driver.Task) error {
	if err := v.CleanUpRamdisk(ctx, t); err != nil {
		return err
	}
	if t.Interfaces[driver.KindDeploy] == RamdiskDeploy {
		return v.prepareRamdiskInstance(ctx, t)
	}
	sys, err := v.system(ctx, t)
	if err != nil {
		return err
	}
	return v.wrap(t, "set persistent boot from disk", sys.SetBoot("Hdd", "Continuous", ""))
}

// prepareRamdiskInstance inserts a ramdisk deploy's instance ISO.
func (v *VirtualMediaBoot) prepareRamdiskInstance(ctx context.Context, t *driver.Task) error {
	media := v.d.opts.Media
	var url string
	if iso, ok := t.InstanceString("boot_iso"); ok && iso != "" {
		if err := v.checkRef(t, "instance_info", "boot_iso", iso, "an ISO image"); err != nil {
			return err
		}
		url = iso
		if p := localPath(iso); p != "" {
			f, err := os.Open(p)
			if err != nil {
				return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: "instance_info", Key: "boot_iso",
					Expected: "a readable ISO image (" + err.Error() + ")"}
			}
			url, err = media.Put(ctx, instanceISOName(t.NodeUUID), f)
			f.Close()
			if err != nil {
				return v.wrap(t, "publish the instance ISO", err)
			}
			t.SetDriverInternalInfo(vmediaInstanceISOKey, url)
		}
	} else {
		kernel, _ := t.InstanceString("kernel")
		ramdisk, _ := t.InstanceString("ramdisk")
		var missing []string
		if kernel == "" {
			missing = append(missing, "kernel")
		}
		if ramdisk == "" {
			missing = append(missing, "ramdisk")
		}
		if len(missing) > 0 {
			return &driver.MissingParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: "instance_info",
				Missing: append([]string{"boot_iso or"}, missing...)}
		}
		k := bootISOSource{"kernel", kernel, "instance_info"}
		r := bootISOSource{"ramdisk", ramdisk, "instance_info"}
		if err := v.checkBuild(t, "instance_info", k, r); err != nil {
			return err
		}
		words := v.appendParams(t)
		if kp, ok := t.InstanceString("kernel_append_params"); ok {
			words = strings.Fields(kp)
		}
		args := strings.Join(words, " ")
		if strings.ContainsAny(args, configMeta) {
			return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: v.kind, Impl: v.name, Field: "instance_info", Key: "kernel_append_params",
				Expected: "kernel parameters without any of " + configMeta}
		}
		var err error
		if url, err = v.publishBuiltISO(ctx, t, instanceISOName(t.NodeUUID), k, r, args); err != nil {
			return err
		}
		t.SetDriverInternalInfo(vmediaInstanceISOKey, url)
	}
	sys, err := v.system(ctx, t)
	if err != nil {
		return err
	}
	if _, err := sys.InsertCD(url); err != nil {
		return v.wrap(t, "insert the instance ISO", err)
	}
	t.SetDriverInternalInfo("redfish_vmedia_inserted", true)
	return v.wrap(t, "set persistent boot from CD", sys.SetBoot("Cd", "Continuous", ""))
}

// CleanUpInstance ejects any virtual media and removes a ramdisk
// deploy's instance ISO from the media store.
func (v *VirtualMediaBoot) CleanUpInstance(ctx context.Context, t *driver.Task) error {
	if err := v.CleanUpRamdisk(ctx, t); err != nil {
		return err
	}
	if url, ok := t.DriverInternalInfo[vmediaInstanceISOKey].(string); ok && url != "" {
		if v.d.opts.Media != nil {
			if err := v.d.opts.Media.Delete(ctx, instanceISOName(t.NodeUUID)); err != nil {
				return v.wrap(t, "remove the node's instance ISO", err)
			}
		}
		t.DeleteDriverInternalInfo(vmediaInstanceISOKey)
	}
	return nil
}

// InspectImpl is the "redfish" (out-of-band) inspect interface.
type InspectImpl struct{ base }

// Inspect returns the "redfish" inspect interface.
func (d *Drivers) Inspect() *InspectImpl {
	return &InspectImpl{base{d, driver.KindInspect, ImplRedfish}}
}

// InspectHardware reads the inventory and records, as Ironic does,
// properties memory_mb, cpus, cpu_arch, local_gb and the boot_mode
// capability (unless already set), a port per enabled NIC, and the
// inventory in IPA's format under driver.InspectionInventoryKey, which the
// conductor stores as the node's inventory (Ironic 2025.2 stores the
// Redfish inventory too, so GET /v1/nodes/{node}/inventory answers after
// out-of-band inspection). It fails
// when memory_mb or cpu_arch cannot be discovered, and then changes
// nothing (no property, port or warning is written: a failed inspection
// leaves the node as it was); other gaps are recorded in
// driver_internal_info.inspection_warnings.
func (i *InspectImpl) InspectHardware(ctx context.Context, t *driver.Task) (driver.StepResult, error) {
	sys, err := i.system(ctx, t)
	if err != nil {
		return driver.StepResult{}, err
	}
	inv, err := sys.Inspect()
	if err != nil {
		return driver.StepResult{}, i.wrap(t, "inspect", err)
	}
	var missing []string
	if inv.MemoryMiB <= 0 {
		missing = append(missing, "memory_mb")
	}
	if inv.CPUArch == "" {
		missing = append(missing, "cpu_arch")
	}
	if len(missing) > 0 {
		return driver.StepResult{}, i.wrap(t, "inspect", fmt.Errorf("%w: could not discover %s", ErrInspection, strings.Join(missing, ", ")))
	}
	t.SetProperty("memory_mb", strconv.Itoa(inv.MemoryMiB))
	if inv.CPUs > 0 {
		t.SetProperty("cpus", inv.CPUs)
	}
	t.SetProperty("cpu_arch", inv.CPUArch)
	t.SetProperty("local_gb", strconv.Itoa(inv.LocalGB()))
	if inv.BootMode != "" {
		caps, _ := t.Properties["capabilities"].(string)
		if !strings.Contains(caps, "boot_mode:") {
			if caps != "" {
				caps += ","
			}
			t.SetProperty("capabilities", caps+"boot_mode:"+inv.BootMode)
		}
	}
	for _, n := range inv.NICs {
		if n.Enabled {
			t.AddPort(driver.Port{Address: n.MAC, PXEEnabled: true})
		}
	}
	if len(inv.Warnings) > 0 {
		t.SetDriverInternalInfo("inspection_warnings", inv.Warnings)
	}
	t.SetDriverInternalInfo(driver.InspectionInventoryKey, inv.IPAInventory())
	return driver.StepResult{}, nil
}
