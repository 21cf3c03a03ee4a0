package netboot

import (
	"strings"
)

// ParseMAC parses an Ethernet (EUI-48) address written with colons or
// hyphens ("52:54:00:12:34:56", "52-54-00-12-34-56", either case) and
// returns it lower case with colons. It accepts nothing else: no
// dotted or bare hex forms, no 8- or 20-byte addresses.
func ParseMAC(s string) (string, bool) {
	if len(s) != 17 {
		return "", false
	}
	sep := s[2]
	if sep != ':' && sep != '-' {
		return "", false
	}
	var b strings.Builder
	b.Grow(17)
	for i := 0; i < 17; i++ {
		c := s[i]
		if i%3 == 2 {
			if c != sep {
				return "", false
			}
			b.WriteByte(':')
			continue
		}
		switch {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			c += 'a' - 'A'
		default:
			return "", false
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

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
