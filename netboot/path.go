package netboot

import "strings"

// maxPathLen bounds a request path (HTTP) or file name (TFTP) before it
// is parsed: the longest name the server serves is well under it.
const maxPathLen = 256

// routeKind is what a request path names.
type routeKind int

const (
	routeNone          routeKind = iota
	routeGenericScript           // boot.ipxe: chains to the MAC's script
	routeScript                  // boot/<mac>/boot.ipxe
	routeGRUBMaster              // grub/grub.cfg
	routeGRUBConfig              // boot/<mac>/grub.cfg, grub/grub.cfg-01-<mac>
	routePXELinuxCfg             // pxelinux.cfg/01-<mac>
	routeKernel                  // boot/<mac>/kernel
	routeRamdisk                 // boot/<mac>/ramdisk
	routeBinary                  // a boot loader binary
)

// route is a parsed request path: a kind, and the MAC (normalised) or the
// binary's name.
type route struct {
	kind routeKind
	mac  string
	file binaryFile
}

// binaryFile is one of the boot loader binaries the server serves from
// the operator's Debian packages.
type binaryFile string

// The binaries, by the names the server serves them under.
const (
	fileUndionly binaryFile = "undionly.kpxe"
	fileSNPOnly  binaryFile = "snponly.efi"
	fileIPXEEFI  binaryFile = "ipxe.efi"
	filePXELinux binaryFile = "pxelinux.0"
	fileLDLinux  binaryFile = "ldlinux.c32"
	fileGRUB     binaryFile = "grubnetx64.efi"
	// fileHTTPGRUB is the GRUB of UEFI HTTP boot (Options.HTTPGRUB).
	fileHTTPGRUB binaryFile = "grubhttpx64.efi"
	// fileShim is Debian's signed shim (Options.Shim); it loads
	// fileSignedGRUB, by that name, from beside itself.
	fileShim       binaryFile = "shimx64.efi"
	fileSignedGRUB binaryFile = "grubx64.efi"
)

func knownBinary(name string) (binaryFile, bool) {
	switch f := binaryFile(name); f {
	case fileUndionly, fileSNPOnly, fileIPXEEFI, filePXELinux, fileLDLinux, fileGRUB, fileHTTPGRUB, fileShim, fileSignedGRUB:
		return f, true
	}
	return "", false
}

// parsePath maps a request path to a route; the leading slash is
// optional (HTTP paths have one, TFTP names do not). Every name is
// matched exactly, element by element, so that a path that is not one
// of these (a traversal, a directory, an encoded slash, a doubled slash)
// is routeNone: no file outside the table can be named.
//
// The layout, on both HTTP and TFTP:
//
//	boot.ipxe                      iPXE script chaining to the MAC's script
//	boot/<mac>/boot.ipxe           the MAC's iPXE script
//	boot/<mac>/grub.cfg            the MAC's GRUB configuration
//	boot/<mac>/kernel, .../ramdisk the MAC's kernel and ramdisk (local files)
//	grub/grub.cfg                  GRUB's master configuration (reads boot/<mac>/grub.cfg)
//	grub/grub.cfg-01-<mac>         the MAC's GRUB configuration, by GRUB's own naming
//	pxelinux.cfg/01-<mac>          the MAC's pxelinux configuration
//	<binary>, ipxe/<binary>, grub/<binary>
//	                               undionly.kpxe, snponly.efi, ipxe.efi, pxelinux.0,
//	                               ldlinux.c32, grubnetx64.efi, grubhttpx64.efi
//	boot/<mac>/<binary>            the same, named for a MAC (DHCPv6 boot file URLs)
//
// <mac> is written with hyphens or colons, in either case.
func parsePath(p string) route {
	if len(p) > maxPathLen {
		return route{}
	}
	p = strings.TrimPrefix(p, "/")
	parts := strings.Split(p, "/")
	switch len(parts) {
	case 1:
		if parts[0] == "boot.ipxe" {
			return route{kind: routeGenericScript}
		}
		if f, ok := knownBinary(parts[0]); ok {
			return route{kind: routeBinary, file: f}
		}
	case 2:
		dir, name := parts[0], parts[1]
		switch dir {
		case "ipxe", "grub":
			if f, ok := knownBinary(name); ok {
				return route{kind: routeBinary, file: f}
			}
			if dir == "grub" && name == "grub.cfg" {
				return route{kind: routeGRUBMaster}
			}
			if mac, ok := macAfter(name, "grub.cfg-01-"); dir == "grub" && ok {
				return route{kind: routeGRUBConfig, mac: mac}
			}
		case "pxelinux.cfg":
			if mac, ok := macAfter(name, "01-"); ok {
				return route{kind: routePXELinuxCfg, mac: mac}
			}
		}
	case 3:
		if parts[0] != "boot" {
			return route{}
		}
		mac, ok := ParseMAC(parts[1])
		if !ok {
			return route{}
		}
		switch parts[2] {
		case "boot.ipxe":
			return route{kind: routeScript, mac: mac}
		case "grub.cfg":
			return route{kind: routeGRUBConfig, mac: mac}
		case "kernel":
			return route{kind: routeKernel, mac: mac}
		case "ramdisk":
			return route{kind: routeRamdisk, mac: mac}
		}
		if f, ok := knownBinary(parts[2]); ok {
			return route{kind: routeBinary, mac: mac, file: f}
		}
	}
	return route{}
}

// macAfter parses the hyphenated MAC that follows prefix in name.
func macAfter(name, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || len(rest) != 17 || rest[2] != '-' {
		return "", false
	}
	return ParseMAC(rest)
}
