package netboot

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// Bounds of a configuration.
const (
	maxMACs       = 64
	maxNodeLen    = 128
	maxParams     = 128
	maxParamLen   = 1024
	maxURLLen     = 1024
	maxPathArgLen = 1024
	// maxCmdline is x86 Linux's COMMAND_LINE_SIZE: a longer command line
	// is cut by the kernel, silently.
	maxCmdline = 2048
)

// paramByte reports whether c may appear in a kernel parameter. The set
// is what parameters need (key=value, URLs without a query, console
// settings, lists) and nothing that any of the three languages the
// parameters are written into gives a meaning: no white space, quotes,
// backslash, '$' (iPXE and GRUB expansion), ';', '|', '&', '<', '>',
// '{', '}', '#', '*', '?' (GRUB syntax and globbing).
func paramByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-_.,:/=+@%~[]^!", c) >= 0
}

// urlByte is paramByte plus '?' and '&' for a kernel or ramdisk URL's
// query (object stores' temporary URLs): URLs go into iPXE scripts only,
// where a single '&' inside a word has no meaning.
func urlByte(c byte) bool { return paramByte(c) || c == '?' || c == '&' }

// nodeByte is the set a node identifier is limited to: it is written into
// script comments and dnsmasq tags and file names.
func nodeByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c == '-' || c == '_' || c == '.'
}

func firstBad(s string, ok func(byte) bool) int {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return i
		}
	}
	return -1
}

func badByteReason(s string, i int) string {
	return fmt.Sprintf("byte %d (%q) is not allowed", i, s[i])
}

// Normalize checks c as Server.PutConfig does and returns it with its
// MACs normalised (ParseMAC) and de-duplicated, or an
// *InvalidConfigError naming the field. It checks everything that does
// not depend on a server: not the boot loader files the interface and
// mode need, nor that local kernel and ramdisk paths are readable files,
// nor MACs held by other nodes. Test doubles of a ConfigStore call it to
// refuse what the server refuses.
func (c Config) Normalize() (Config, error) {
	bad := func(field, reason string) error {
		return &InvalidConfigError{Node: c.Node, Field: field, Reason: reason}
	}
	if c.Node == "" {
		return c, bad("node", "empty")
	}
	if len(c.Node) > maxNodeLen {
		return c, bad("node", fmt.Sprintf("longer than %d bytes", maxNodeLen))
	}
	if i := firstBad(c.Node, nodeByte); i >= 0 || c.Node[0] == '.' {
		if i < 0 {
			i = 0
		}
		return c, bad("node", badByteReason(c.Node, i)+" (letters, digits, '-', '_', '.'; not starting with '.')")
	}
	if len(c.MACs) == 0 {
		return c, bad("macs", "no MAC address")
	}
	if len(c.MACs) > maxMACs {
		return c, bad("macs", fmt.Sprintf("more than %d MAC addresses", maxMACs))
	}
	seen := make(map[string]bool, len(c.MACs))
	macs := make([]string, 0, len(c.MACs))
	for i, m := range c.MACs {
		mac, ok := ParseMAC(m)
		if !ok {
			return c, bad(fmt.Sprintf("macs[%d]", i), fmt.Sprintf("%q is not an Ethernet MAC address (aa:bb:cc:dd:ee:ff)", truncate(m, 40)))
		}
		if !seen[mac] {
			seen[mac] = true
			macs = append(macs, mac)
		}
	}
	c.MACs = macs
	switch c.Interface {
	case PXE, IPXE, HTTP, HTTPIPXE:
	default:
		return c, bad("interface", fmt.Sprintf("%q is not one of pxe, ipxe, http, http-ipxe", truncate(string(c.Interface), 40)))
	}
	switch c.Mode {
	case BIOS, UEFI:
	default:
		return c, bad("mode", fmt.Sprintf("%q is not bios or uefi", truncate(string(c.Mode), 40)))
	}
	if (c.Interface == HTTP || c.Interface == HTTPIPXE) && c.Mode != UEFI {
		return c, bad("mode", fmt.Sprintf("interface %s needs uefi (HTTP boot is a UEFI feature)", c.Interface))
	}
	if c.SecureBoot && (c.Interface != PXE || c.Mode != UEFI) {
		return c, bad("secure_boot", fmt.Sprintf("interface %s in %s mode has no signed boot chain (only pxe in uefi mode: shim and GRUB signed)", c.Interface, c.Mode))
	}
	if len(c.Purpose) > 32 || firstBad(c.Purpose, nodeByte) >= 0 {
		return c, bad("purpose", "at most 32 letters, digits, '-', '_', '.'")
	}
	if c.IPXETimeout < 0 {
		return c, bad("ipxe_timeout", "negative")
	}
	switch c.Action {
	case LocalDisk:
		return c, nil
	case Ramdisk:
	default:
		return c, bad("action", fmt.Sprintf("%q is not ramdisk or local", truncate(string(c.Action), 40)))
	}
	// Kernel and ramdisk: pxe and http boot through pxelinux or GRUB,
	// which fetch them from this server only (pxelinux.0 speaks TFTP
	// only; GRUB 2.06 speaks neither https nor ports reliably), so those
	// take local paths; the boot interface caches a URL first.
	urlOK := c.Interface == IPXE || c.Interface == HTTPIPXE
	for _, f := range []struct{ name, v string }{{"kernel", c.Kernel}, {"ramdisk", c.Ramdisk}} {
		if err := checkImage(f.v, urlOK); err != "" {
			return c, bad(f.name, err)
		}
	}
	if err := checkParams(c.Params); err != nil {
		return c, &InvalidConfigError{Node: c.Node, Field: err.Field, Reason: err.Reason}
	}
	return c, nil
}

// checkImage validates a kernel or ramdisk reference; it returns the
// reason it is refused, or "".
func checkImage(v string, urlOK bool) string {
	switch {
	case v == "":
		return "empty (an absolute local path, or an http(s) URL)"
	case strings.HasPrefix(v, "/"):
		if len(v) > maxPathArgLen {
			return fmt.Sprintf("longer than %d bytes", maxPathArgLen)
		}
		if filepath.Clean(v) != v {
			return "not a clean absolute path (no '..', '.', '//' or trailing '/')"
		}
		return ""
	case strings.HasPrefix(v, "http://"), strings.HasPrefix(v, "https://"):
		if !urlOK {
			return "a URL: pxe and http boot load kernel and ramdisk from this server only; give a local path"
		}
		if len(v) > maxURLLen {
			return fmt.Sprintf("longer than %d bytes", maxURLLen)
		}
		if i := firstBad(v, urlByte); i >= 0 {
			return badByteReason(v, i) + " in the URL"
		}
		if strings.Contains(v, "&&") {
			return "'&&' in the URL"
		}
		u, err := url.Parse(v)
		if err != nil || u.Host == "" {
			return "not a URL with a host"
		}
		return ""
	}
	return "neither an absolute local path nor an http(s) URL"
}

// checkParams validates kernel parameters one by one against paramByte
// and the bounds.
func checkParams(params []string) *InvalidConfigError {
	if len(params) > maxParams {
		return &InvalidConfigError{Field: "params", Reason: fmt.Sprintf("more than %d parameters", maxParams)}
	}
	total := 0
	for i, p := range params {
		field := fmt.Sprintf("params[%d]", i)
		if p == "" {
			return &InvalidConfigError{Field: field, Reason: "empty"}
		}
		if len(p) > maxParamLen {
			return &InvalidConfigError{Field: field, Reason: fmt.Sprintf("longer than %d bytes", maxParamLen)}
		}
		if j := firstBad(p, paramByte); j >= 0 {
			return &InvalidConfigError{Field: field, Reason: badByteReason(p, j) +
				" (kernel parameters are written into iPXE, GRUB and pxelinux configurations unquoted)"}
		}
		if strings.HasPrefix(p, "initrd=") || strings.HasPrefix(p, "BOOTIF=") {
			return &InvalidConfigError{Field: field, Reason: "initrd= and BOOTIF= are added by the boot server"}
		}
		total += len(p) + 1
	}
	// Room for what the server adds: initrd=ramdisk and BOOTIF=01-<mac>.
	if total+len("initrd=ramdisk BOOTIF=01-aa-bb-cc-dd-ee-ff") > maxCmdline {
		return &InvalidConfigError{Field: "params", Reason: fmt.Sprintf("the command line is longer than %d bytes", maxCmdline)}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
