package dhcp

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Vendor class identifiers (option 60) of network boot firmware.
const (
	vendorPXE  = "PXEClient"
	vendorHTTP = "HTTPClient"
)

// DHCP options the library has no name for.
const (
	optionIPXEEncapsulated = 175 // iPXE's own options; only iPXE sends it
)

// archCodes maps RFC 4578 / IANA processor architecture types (option 93)
// to the architectures the boot server tells apart.
var archCodes = map[uint16]Arch{
	0:  ArchBIOS,
	6:  ArchEFIIA32,
	7:  ArchEFIx64,
	9:  ArchEFIx64, // EFI BC: x86-64 in every firmware that sends it
	10: ArchEFIARM32,
	11: ArchEFIARM64,
	15: ArchEFIIA32HTTP,
	16: ArchEFIx64HTTP,
	19: ArchEFIARM64HTTP,
}

// ArchFromCode returns the architecture of an option 93 type code, and
// ArchUnknown for a code the boot server does not boot.
func ArchFromCode(code uint16) Arch { return archCodes[code] }

// Classify says what the server can learn about a client from its
// request: it never fails, a field it cannot read stays zero.
func Classify(req *dhcpv4.DHCPv4) Client {
	c := Client{
		MAC:         macString(req),
		VendorClass: req.ClassIdentifier(),
		Hostname:    req.HostName(),
		UserClass:   userClasses(req.Options.Get(dhcpv4.OptionUserClassInformation)),
	}
	if gi, ok := netip.AddrFromSlice(req.GatewayIPAddr.To4()); ok && !gi.IsUnspecified() {
		c.Relay = gi
	}
	vc := ParseVendorClass(c.VendorClass)
	c.PXEClient = vc.PXEClient
	c.HTTPClient = vc.HTTPClient
	if raw := req.Options.Get(dhcpv4.OptionClientSystemArchitectureType); len(raw) >= 2 {
		// The first type is the one the firmware is running; more follow
		// only on firmware that can run several.
		c.Arch = ArchFromCode(uint16(raw[0])<<8 | uint16(raw[1]))
	} else if vc.HasArch {
		c.Arch = ArchFromCode(vc.Arch)
	}
	if req.Options.Has(dhcpv4.GenericOptionCode(optionIPXEEncapsulated)) {
		c.IPXE = true
	}
	for _, u := range c.UserClass {
		if u == "iPXE" {
			c.IPXE = true
		}
	}
	return c
}

// VendorClass is what a PXE or HTTP boot vendor class identifier (option
// 60) says, e.g. "PXEClient:Arch:00007:UNDI:003016".
type VendorClass struct {
	PXEClient  bool
	HTTPClient bool
	// HasArch is true when the identifier carries a well-formed
	// "Arch:NNNNN" field; Arch is its value.
	HasArch bool
	Arch    uint16
	// UNDI is the UNDI version field ("003016": major 3, minor 16), or
	// empty.
	UNDI string
}

// ParseVendorClass parses a vendor class identifier. Identifiers that are
// not PXE or HTTP boot ones give the zero VendorClass; malformed fields
// after a known prefix are skipped, never guessed.
func ParseVendorClass(s string) VendorClass {
	var v VendorClass
	switch {
	case strings.HasPrefix(s, vendorPXE):
		v.PXEClient = true
	case strings.HasPrefix(s, vendorHTTP):
		v.HTTPClient = true
	default:
		return v
	}
	// The fields that matter sit in the first 64 bytes; a longer string
	// is not a firmware's and is not read further.
	if len(s) > 64 {
		s = s[:64]
	}
	fields := strings.Split(s, ":")
	for i := 1; i+1 < len(fields); i++ {
		switch fields[i] {
		case "Arch":
			if n, ok := decimalField(fields[i+1], 5); ok && n <= 0xffff && !v.HasArch {
				v.HasArch, v.Arch = true, uint16(n)
			}
		case "UNDI":
			if _, ok := decimalField(fields[i+1], 6); ok && v.UNDI == "" {
				v.UNDI = fields[i+1]
			}
		}
	}
	return v
}

// decimalField parses exactly width decimal digits.
func decimalField(s string, width int) (uint64, bool) {
	if len(s) != width {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return n, err == nil
}

// userClasses reads option 77 either as RFC 3004 (length-prefixed
// entries) or, as iPXE and most firmware send it, as one plain string.
func userClasses(raw []byte) []string {
	if len(raw) == 0 {
		return nil
	}
	var out []string
	for rest := raw; len(rest) > 0; {
		n := int(rest[0])
		if n == 0 || n > len(rest)-1 {
			return []string{string(raw)}
		}
		out = append(out, string(rest[1:1+n]))
		rest = rest[1+n:]
	}
	return out
}

// macString is the client hardware address as Client.MAC, or empty when
// the request does not carry an Ethernet address.
func macString(req *dhcpv4.DHCPv4) string {
	if len(req.ClientHWAddr) != 6 {
		return ""
	}
	return req.ClientHWAddr.String()
}
