package netboot

import (
	"context"
	"time"
)

// Interface is the boot interface a Config was written for; it decides
// what the boot server hands the machine.
type Interface string

// The network boot interfaces, with Ironic's names.
const (
	// PXE: the firmware's PXE loads a PXE boot loader over TFTP
	// (pxelinux.0 for BIOS, GRUB for UEFI), which loads kernel and
	// ramdisk over TFTP.
	PXE Interface = "pxe"
	// IPXE: the firmware's PXE chain-loads iPXE over TFTP (undionly.kpxe,
	// snponly.efi); iPXE fetches the node's script, kernel and ramdisk
	// over HTTP.
	IPXE Interface = "ipxe"
	// HTTP: UEFI HTTP boot loads a boot loader (GRUB) by URL, which loads
	// kernel and ramdisk over HTTP.
	HTTP Interface = "http"
	// HTTPIPXE: UEFI HTTP boot loads iPXE by URL, which fetches the
	// node's script.
	HTTPIPXE Interface = "http-ipxe"
)

// Mode is a firmware boot mode.
type Mode string

// Boot modes, with Ironic's names.
const (
	BIOS Mode = "bios"
	UEFI Mode = "uefi"
)

// Action is what a Config tells the machine to do.
type Action string

// Actions.
const (
	// Ramdisk boots Kernel and Ramdisk with Params (the agent ramdisk
	// for deploy, clean, inspect, rescue or service; or an instance
	// kernel and ramdisk for a ramdisk deploy).
	Ramdisk Action = "ramdisk"
	// LocalDisk makes the machine boot from its local disk (iPXE exit or
	// sanboot, PXE localboot).
	LocalDisk Action = "local"
)

// Config is one node's boot configuration, as a boot interface writes it.
// It is keyed by each of MACs (the node's pxe-enabled ports).
type Config struct {
	Node     string `json:"node"`
	NodeName string `json:"node_name,omitempty"`
	// MACs are lower-case colon-separated MAC addresses.
	MACs      []string  `json:"macs"`
	Interface Interface `json:"interface"`
	Mode      Mode      `json:"mode"`
	Action    Action    `json:"action"`
	// Purpose says why the ramdisk boots: "deploy", "clean", "inspect",
	// "rescue", "service", or "instance" for a ramdisk deploy.
	Purpose string `json:"purpose,omitempty"`
	// Kernel and Ramdisk are http(s) URLs, or absolute local paths the
	// boot server serves (over TFTP for pxe, HTTP otherwise).
	Kernel  string `json:"kernel,omitempty"`
	Ramdisk string `json:"ramdisk,omitempty"`
	// Params are the kernel command line parameters, in order, without
	// the initrd= and BOOTIF= ones the boot server adds. Never a secret
	// (the agent token is never on the command line).
	Params []string `json:"params,omitempty"`
	// IPXETimeout bounds each iPXE HTTP fetch (Ironic's
	// [pxe]ipxe_timeout); zero means iPXE's own default.
	IPXETimeout time.Duration `json:"ipxe_timeout,omitempty"`
	// SecureBoot boots the machine's UEFI firmware with secure boot on
	// (interface pxe, mode uefi only): UEFI PXE loads Debian's signed
	// shim (Options.Shim, served as shimx64.efi), which loads the signed
	// GRUB beside it (Options.SignedGRUB, served as grubx64.efi), which
	// has shim verify the kernel (a signed one, as Debian's is).
	SecureBoot bool `json:"secure_boot,omitempty"`
}

// ConfigStore keeps node boot configurations. The boot interfaces write
// to one; the boot server reads the one it serves. Implementations are
// safe for concurrent use.
type ConfigStore interface {
	// PutConfig stores c, replacing the node's earlier configuration and
	// every MAC mapping it had. It fails (and changes nothing) when a MAC
	// of c belongs to another node's configuration.
	PutConfig(ctx context.Context, c Config) error
	// DeleteConfig removes the node's configuration and MAC mappings; a
	// node without one is not an error.
	DeleteConfig(ctx context.Context, node string) error
}

// Resolver says which enrolled node a MAC address belongs to, so that the
// boot server can tell a known machine without a boot configuration (it
// boots from its local disk: it is active or available and nobody is
// working on it) from one nobody enrolled (the fallback script, when one
// is configured).
type Resolver interface {
	NodeForMAC(ctx context.Context, mac string) (node string, found bool, err error)
}
