package pxe

import (
	"context"
	"fmt"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/netboot"
)

// Names of the implementations, as Ironic names them.
const (
	NamePXE      = "pxe"
	NameIPXE     = "ipxe"
	NameHTTP     = "http"
	NameHTTPIPXE = "http-ipxe"
)

// DefaultKernelAppendParams is Ironic's [pxe]kernel_append_params
// default.
const DefaultKernelAppendParams = "nofb nomodeset vga=normal"

// Options are the deployment-wide settings of the network boot
// interfaces: Ironic's [pxe], [deploy] and [conductor] options. Every
// zero field means the default named on it.
type Options struct {
	// KernelAppendParams are the ramdisk kernel parameters for nodes
	// whose instance_info and driver_info set none (Ironic's
	// [pxe]kernel_append_params); default DefaultKernelAppendParams. A
	// node's own value may include this one with "%default%".
	KernelAppendParams string
	// DefaultBootMode is the boot mode of nodes that name none (Ironic's
	// [deploy]default_boot_mode); default netboot.UEFI.
	DefaultBootMode netboot.Mode
	// IPXETimeout bounds each HTTP fetch of iPXE (Ironic's
	// [ipxe]ipxe_timeout); zero means iPXE's own default.
	IPXETimeout time.Duration
	// DeployKernel and DeployRamdisk are the deploy (agent) kernel and
	// ramdisk for nodes whose driver_info names none (Ironic's
	// [conductor]deploy_kernel and deploy_ramdisk): http(s) URLs or
	// absolute paths the boot server serves.
	DeployKernel, DeployRamdisk string
	// RescueKernel and RescueRamdisk are the same for rescue (Ironic's
	// [conductor]rescue_kernel and rescue_ramdisk).
	RescueKernel, RescueRamdisk string
}

// InternalConfigKey is the driver_internal_info key recording which boot
// configuration the interface last wrote: "ramdisk", "instance" (a
// ramdisk deploy's instance) or "local"; absent once it removed the
// configuration. The interfaces write it and read it to decide what
// their clean-ups remove; other code may read it but must not set it.
// It is not the configuration itself, which is in the ConfigStore.
const InternalConfigKey = "netboot_config"

// Interfaces are the four network boot interfaces over one ConfigStore.
// They are safe for concurrent use.
type Interfaces struct {
	store netboot.ConfigStore
	opts  Options
}

// New returns the network boot interfaces writing into store. It panics
// when store is nil or an option is malformed (a default boot mode other
// than bios or uefi, a default image that is neither an http(s) URL nor
// an absolute path, unsafe default kernel parameters): those are
// mistakes of the program, found at start.
func New(store netboot.ConfigStore, opts Options) *Interfaces {
	if store == nil {
		panic("pxe: New: nil ConfigStore")
	}
	if opts.KernelAppendParams == "" {
		opts.KernelAppendParams = DefaultKernelAppendParams
	}
	if opts.DefaultBootMode == "" {
		opts.DefaultBootMode = netboot.UEFI
	}
	if opts.DefaultBootMode != netboot.BIOS && opts.DefaultBootMode != netboot.UEFI {
		panic(fmt.Sprintf("pxe: New: Options.DefaultBootMode %q is not %q or %q", opts.DefaultBootMode, netboot.BIOS, netboot.UEFI))
	}
	if opts.IPXETimeout < 0 {
		panic("pxe: New: negative Options.IPXETimeout")
	}
	for name, ref := range map[string]string{"DeployKernel": opts.DeployKernel, "DeployRamdisk": opts.DeployRamdisk,
		"RescueKernel": opts.RescueKernel, "RescueRamdisk": opts.RescueRamdisk} {
		if ref != "" && !validImageRef(ref) {
			panic(fmt.Sprintf("pxe: New: Options.%s: expected %s", name, imageRefExpected))
		}
	}
	if _, err := splitParams(opts.KernelAppendParams); err != nil {
		panic(fmt.Sprintf("pxe: New: Options.KernelAppendParams: %v", err))
	}
	return &Interfaces{store: store, opts: opts}
}

// Boot is one of the network boot interfaces. The conductor recognises it
// by its NetworkBoot method: after its PrepareRamdisk, it records the
// stage.Prepared boot stage that starts the node's boot-stage checks.
type Boot struct {
	x     *Interfaces
	name  string
	iface netboot.Interface
}

// PXE returns the "pxe" boot interface: PXE loads a boot loader
// (pxelinux for BIOS, GRUB for UEFI) over TFTP, which loads the kernel
// and ramdisk over TFTP.
func (x *Interfaces) PXE() *Boot { return &Boot{x, NamePXE, netboot.PXE} }

// IPXE returns the "ipxe" boot interface: PXE chain-loads iPXE, which
// fetches the node's script, kernel and ramdisk over HTTP.
func (x *Interfaces) IPXE() *Boot { return &Boot{x, NameIPXE, netboot.IPXE} }

// HTTP returns the "http" boot interface: UEFI HTTP boot loads GRUB by
// URL, which loads the kernel and ramdisk over HTTP. It needs UEFI.
func (x *Interfaces) HTTP() *Boot { return &Boot{x, NameHTTP, netboot.HTTP} }

// HTTPIPXE returns the "http-ipxe" boot interface: UEFI HTTP boot loads
// iPXE by URL, which fetches the node's script. It needs UEFI.
func (x *Interfaces) HTTPIPXE() *Boot { return &Boot{x, NameHTTPIPXE, netboot.HTTPIPXE} }

// Bundle returns the four implementations (no hardware type: the ipmi,
// redfish and manual-management hardware types already list them, in
// Ironic's order ipxe, pxe, http-ipxe, http).
func (x *Interfaces) Bundle() driver.Bundle {
	var impls []driver.Implementation
	for _, b := range []*Boot{x.IPXE(), x.PXE(), x.HTTPIPXE(), x.HTTP()} {
		impls = append(impls, driver.Implementation{Kind: driver.KindBoot, Name: b.name, Impl: b})
	}
	return driver.Bundle{Implementations: impls}
}

// Name returns the implementation name ("pxe", "ipxe", "http" or
// "http-ipxe").
func (b *Boot) Name() string { return b.name }

// NetworkBoot returns the name of the netboot.Interface the
// configurations of b are written for ("ipxe", "http-ipxe", ...). Having
// the method is what counts: the conductor treats any boot interface
// with a NetworkBoot() string method as one whose ramdisk boots the boot
// server serves, so after its PrepareRamdisk the conductor records
// "boot prepared" and the stall check of Options.BootStageDeadlines
// applies; the value is not read. A boot interface whose machines the
// boot server does not boot must not have it. (A string, not a
// netboot.Interface, so that the conductor need not import netboot.)
func (b *Boot) NetworkBoot() string { return string(b.iface) }

// needsUEFI reports whether b boots through UEFI HTTP boot.
func (b *Boot) needsUEFI() bool { return b.iface == netboot.HTTP || b.iface == netboot.HTTPIPXE }

// Properties returns the driver_info properties Ironic's pxe and ipxe
// boot interfaces list. deploy_kernel and deploy_ramdisk are required
// unless Options gives a default for them.
func (b *Boot) Properties() []driver.Property {
	o := b.x.opts
	req := func(def string) (bool, string) {
		if def != "" {
			return false, " Optional: defaults to the conductor's setting."
		}
		return true, " Required."
	}
	dkReq, dkNote := req(o.DeployKernel)
	drReq, drNote := req(o.DeployRamdisk)
	return []driver.Property{
		{Name: "deploy_kernel", Required: dkReq, Description: "The deployment (agent) kernel: an http(s) URL, or an absolute path the boot server serves." + dkNote},
		{Name: "deploy_ramdisk", Required: drReq, Description: "The deployment (agent) ramdisk that is mounted at boot time: an http(s) URL, or an absolute path the boot server serves." + drNote},
		{Name: "rescue_kernel", Description: "The rescue kernel: an http(s) URL or an absolute path. This value is required for rescue mode (unless the conductor sets a default)."},
		{Name: "rescue_ramdisk", Description: "The rescue ramdisk: an http(s) URL or an absolute path. This value is required for rescue mode (unless the conductor sets a default)."},
		{Name: "kernel_append_params", Description: "Additional kernel parameters for the ramdisk, whitespace separated, before the conductor's own (ipa-api-url=...); \"%default%\" stands for the conductor's [pxe]kernel_append_params. instance_info.kernel_append_params overrides it. No quotes, ';', '$', '#', braces or control characters. Optional."},
		{Name: "force_persistent_boot_device", Description: "Controls the persistency of boot order changes: \"Always\" makes every change persistent, \"Default\" makes all but the final one upon instance deployment non-persistent, \"Never\" makes none persistent. Defaults to \"Default\". Optional."},
	}
}

// Validate checks what a network boot needs, without touching the
// machine: a deploy kernel and ramdisk (driver_info or the conductor's
// defaults), each an http(s) URL or an absolute path; at least one
// pxe-enabled port with a valid MAC address; a valid boot mode (uefi for
// http and http-ipxe); and kernel_append_params that cannot change the
// boot loader configuration they are written into.
func (b *Boot) Validate(ctx context.Context, t *driver.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, _, err := b.images(t, false); err != nil {
		return err
	}
	if _, err := b.macs(t); err != nil {
		return err
	}
	if _, err := b.mode(t); err != nil {
		return err
	}
	if _, err := b.persistence(t); err != nil {
		return err
	}
	_, err := b.appendParams(t)
	return err
}

// ValidateRescue checks, as Ironic's validate_rescue does, that the node
// has a rescue kernel and ramdisk (driver_info or the conductor's
// defaults) in a usable form.
func (b *Boot) ValidateRescue(ctx context.Context, t *driver.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, _, err := b.images(t, true)
	return err
}

var (
	_ driver.BootInterface = (*Boot)(nil)
)
