package dhcp

import (
	"net"
	"net/netip"
	"reflect"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		mods []dhcpv4.Modifier
		want Client
	}{
		{"plain", nil, Client{MAC: macA}},
		{"bios pxe", []dhcpv4.Modifier{pxeBIOS()},
			Client{MAC: macA, Arch: ArchBIOS, PXEClient: true, VendorClass: "PXEClient:Arch:00000:UNDI:002001"}},
		{"efi pxe", []dhcpv4.Modifier{pxeEFI()},
			Client{MAC: macA, Arch: ArchEFIx64, PXEClient: true, VendorClass: "PXEClient:Arch:00007:UNDI:003016"}},
		{"arch from the vendor class when option 93 is missing",
			[]dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00011:UNDI:003016"))},
			Client{MAC: macA, Arch: ArchEFIARM64, PXEClient: true, VendorClass: "PXEClient:Arch:00011:UNDI:003016"}},
		{"option 93 wins over the vendor class",
			[]dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001")),
				dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_BC))},
			Client{MAC: macA, Arch: ArchEFIx64, PXEClient: true, VendorClass: "PXEClient:Arch:00000:UNDI:002001"}},
		{"first of several architectures",
			[]dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_IA32, iana.EFI_X86_64))},
			Client{MAC: macA, Arch: ArchEFIIA32}},
		{"unknown architecture", []dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_RISCV64))},
			Client{MAC: macA}},
		{"ipxe by user class and option 175", []dhcpv4.Modifier{ipxeClient()},
			Client{MAC: macA, Arch: ArchBIOS, PXEClient: true, IPXE: true, UserClass: []string{"iPXE"}, VendorClass: "PXEClient:Arch:00000:UNDI:002001"}},
		{"ipxe by RFC 3004 user class", []dhcpv4.Modifier{dhcpv4.WithUserClass("iPXE", true)},
			Client{MAC: macA, IPXE: true, UserClass: []string{"iPXE"}}},
		{"ipxe by option 175 alone",
			[]dhcpv4.Modifier{dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(175), []byte{0x13, 0x01, 0x01})},
			Client{MAC: macA, IPXE: true}},
		{"http boot", []dhcpv4.Modifier{httpClient()},
			Client{MAC: macA, Arch: ArchEFIx64HTTP, HTTPClient: true, VendorClass: "HTTPClient:Arch:00016:UNDI:003001"}},
		{"arm64 http boot from the vendor class",
			[]dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptClassIdentifier("HTTPClient:Arch:00019:UNDI:003000"))},
			Client{MAC: macA, Arch: ArchEFIARM64HTTP, HTTPClient: true, VendorClass: "HTTPClient:Arch:00019:UNDI:003000"}},
		{"hostname and relay",
			[]dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptHostName("rack1-u7")), dhcpv4.WithRelay(net.ParseIP("192.0.2.254"))},
			Client{MAC: macA, Hostname: "rack1-u7", Relay: netip.MustParseAddr("192.0.2.254")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(msg(t, dhcpv4.MessageTypeDiscover, macA, tc.mods...))
			if !clientEqual(got, tc.want) {
				t.Errorf("Classify =\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
}

func clientEqual(a, b Client) bool { return reflect.DeepEqual(a, b) }

func TestClassifyNoEthernetAddress(t *testing.T) {
	m := msg(t, dhcpv4.MessageTypeDiscover, macA)
	m.ClientHWAddr = m.ClientHWAddr[:0]
	if c := Classify(m); c.MAC != "" {
		t.Errorf("MAC = %q, want empty for a request without a 6-byte address", c.MAC)
	}
}

func TestParseVendorClass(t *testing.T) {
	cases := []struct {
		in   string
		want VendorClass
	}{
		{"PXEClient:Arch:00007:UNDI:003016", VendorClass{PXEClient: true, HasArch: true, Arch: 7, UNDI: "003016"}},
		{"PXEClient:Arch:00000:UNDI:002001", VendorClass{PXEClient: true, HasArch: true, Arch: 0, UNDI: "002001"}},
		{"HTTPClient:Arch:00016:UNDI:003001", VendorClass{HTTPClient: true, HasArch: true, Arch: 16, UNDI: "003001"}},
		{"HTTPClient", VendorClass{HTTPClient: true}},
		{"PXEClient", VendorClass{PXEClient: true}},
		{"PXEClient:Arch:7:UNDI:003016", VendorClass{PXEClient: true, UNDI: "003016"}},
		{"PXEClient:Arch:0000x", VendorClass{PXEClient: true}},
		{"PXEClient:Arch:99999", VendorClass{PXEClient: true}},
		{"PXEClient:Arch:", VendorClass{PXEClient: true}},
		{"PXEClient:Arch:00009:Arch:00000", VendorClass{PXEClient: true, HasArch: true, Arch: 9}},
		{"MSFT 5.0", VendorClass{}},
		{"udhcp 1.36.1", VendorClass{}},
		{"", VendorClass{}},
	}
	for _, tc := range cases {
		if got := ParseVendorClass(tc.in); got != tc.want {
			t.Errorf("ParseVendorClass(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestArchFromCode(t *testing.T) {
	want := map[uint16]Arch{0: ArchBIOS, 6: ArchEFIIA32, 7: ArchEFIx64, 9: ArchEFIx64, 10: ArchEFIARM32,
		11: ArchEFIARM64, 15: ArchEFIIA32HTTP, 16: ArchEFIx64HTTP, 19: ArchEFIARM64HTTP, 1: ArchUnknown, 28: ArchUnknown}
	for code, a := range want {
		if got := ArchFromCode(code); got != a {
			t.Errorf("ArchFromCode(%d) = %q, want %q", code, got, a)
		}
	}
}
