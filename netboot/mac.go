package netboot

import (
	"strings"

	"github.com/anvilmetal/anvil/internal/macaddr"
)

// ParseMAC parses an Ethernet (EUI-48) address written with colons or
// hyphens ("52:54:00:12:34:56", "52-54-00-12-34-56", either case) and
// returns it lower case with colons. It accepts nothing else: no
// dotted or bare hex forms, no 8- or 20-byte addresses. The rule is
// Ironic's, owned by internal/macaddr.
func ParseMAC(s string) (string, bool) { return macaddr.Parse(s) }

// hyphenMAC is mac (normalised) with hyphens: the form in file names and
// URL paths ("52-54-00-12-34-56").
func hyphenMAC(mac string) string { return strings.ReplaceAll(mac, ":", "-") }

// PXELinuxConfigName is the TFTP name pxelinux asks for a MAC's
// configuration: "pxelinux.cfg/01-" (01 is the ARP hardware type of
// Ethernet) and the MAC with hyphens.
func PXELinuxConfigName(mac string) string { return "pxelinux.cfg/01-" + hyphenMAC(mac) }

// GRUBConfigName is the name a network GRUB searches in its prefix for a
// MAC's configuration when it looks for one itself (GRUB images made by
// grub-mknetdir): "grub/grub.cfg-01-" and the MAC with hyphens. Debian's
// monolithic grubnetx64.efi does not search: it reads grub/grub.cfg, the
// master configuration the server generates, which reads the per-MAC one
// at boot/<mac>/grub.cfg.
func GRUBConfigName(mac string) string { return "grub/grub.cfg-01-" + hyphenMAC(mac) }

// ScriptPath is the HTTP path of a MAC's iPXE script.
func ScriptPath(mac string) string { return "/boot/" + hyphenMAC(mac) + "/boot.ipxe" }

// KernelPath and RamdiskPath are the paths (HTTP, and TFTP without the
// leading slash) a MAC's kernel and ramdisk are served at, when they are
// local files.
func KernelPath(mac string) string  { return "/boot/" + hyphenMAC(mac) + "/kernel" }
func RamdiskPath(mac string) string { return "/boot/" + hyphenMAC(mac) + "/ramdisk" }
