package dhcp6

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/anvilmetal/anvil/netboot/stage"
)

// manualClock is a clock the test moves by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2026, 12, 1, 10, 42, 0, 0, time.UTC)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- c.Now().Add(d)
	return ch
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var (
	serverAddr = netip.MustParseAddr("fd00:a6::1")
	prefix     = netip.MustParsePrefix("fd00:a6::/64")
	// A fixed server DUID, so that golden files do not depend on the
	// derivation.
	serverDUID = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{0x02, 0, 0, 0, 0xa6, 1}}
)

// Test MACs: the Decider knows them as node-<last byte>; macIgnored is
// ignored; macNoBoot gets no boot file; macReserve has a reservation.
const (
	macA       = "52:54:00:00:00:0a"
	macB       = "52:54:00:00:00:0b"
	macIgnored = "52:54:00:00:00:ff"
	macNoBoot  = "52:54:00:00:00:ee"
	macReserve = "52:54:00:00:00:50"
)

// testDecider boots by client kind, as the boot server's decider does.
func testDecider(_ context.Context, c Client) Decision {
	switch c.MAC {
	case macIgnored:
		return Decision{Ignore: true}
	case macNoBoot:
		return Decision{}
	}
	d := Decision{Node: "node-" + c.MAC[len(c.MAC)-2:]}
	if c.MAC == macReserve {
		d.Address = netip.MustParseAddr("fd00:a6::50")
	}
	m := strings.ReplaceAll(c.MAC, ":", "-")
	switch {
	case c.IPXE:
		d.BootFileURL = "http://[fd00:a6::1]:8080/boot/" + m + "/boot.ipxe"
	case c.HTTPClient:
		d.BootFileURL = "http://[fd00:a6::1]:8080/boot/" + m + "/snponly.efi"
	case c.Arch.UEFI():
		d.BootFileURL = "tftp://[fd00:a6::1]/boot/" + m + "/snponly.efi"
	}
	return d
}

func newTestServer(t testing.TB, mode Mode, opts ...func(*Options)) (*Server, *manualClock, *stage.Recorder) {
	t.Helper()
	clk, rec := newManualClock(), &stage.Recorder{}
	o := Options{
		Mode:       mode,
		ServerDUID: serverDUID,
		ServerAddr: serverAddr,
		Prefix:     prefix,
		PoolStart:  netip.MustParseAddr("fd00:a6::100"),
		PoolEnd:    netip.MustParseAddr("fd00:a6::103"),
		DNS:        []netip.Addr{netip.MustParseAddr("fd00:a6::53")},
		Decider:    DeciderFunc(testDecider),
		Observer:   rec,
		Clock:      clk,
		Logger:     slog.New(slog.DiscardHandler),
	}
	for _, f := range opts {
		f(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, clk, rec
}

func hw(t testing.TB, s string) net.HardwareAddr {
	t.Helper()
	h, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// linkLocal is the EUI-64 link-local address of mac.
func linkLocal(t testing.TB, mac string) netip.Addr {
	h := hw(t, mac)
	var b [16]byte
	b[0], b[1] = 0xfe, 0x80
	b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15] = h[0]^2, h[1], h[2], 0xff, 0xfe, h[3], h[4], h[5]
	return netip.AddrFrom16(b)
}

// direct is how a client on the link reaches the server.
func direct(t testing.TB, mac string) Source { return Source{Peer: linkLocal(t, mac).WithZone("eth0")} }

// Client identities.
func duidLL(t testing.TB, mac string) dhcpv6.DUID {
	return &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: hw(t, mac)}
}

func duidLLT(t testing.TB, mac string) dhcpv6.DUID {
	return &dhcpv6.DUIDLLT{HWType: iana.HWTypeEthernet, Time: 0x2f000000, LinkLayerAddr: hw(t, mac)}
}

// duidUUID is the DUID iPXE and some firmware send: no MAC in it.
func duidUUID(name string) dhcpv6.DUID {
	return &dhcpv6.DUIDUUID{UUID: uuid.NewSHA1(uuid.NameSpaceOID, []byte(name))}
}

// msg builds a client message with a fixed transaction ID, IAID
// 0a0b0c0d, and the client identifier duid.
func msg(t testing.TB, mt dhcpv6.MessageType, duid dhcpv6.DUID, mods ...dhcpv6.Modifier) *dhcpv6.Message {
	t.Helper()
	m := &dhcpv6.Message{MessageType: mt, TransactionID: dhcpv6.TransactionID{0xbe, 0xef, 0x01}}
	if duid != nil {
		m.AddOption(dhcpv6.OptClientID(duid))
	}
	m.AddOption(dhcpv6.OptElapsedTime(0))
	switch mt {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest:
		dhcpv6.WithIAID([4]byte{0x0a, 0x0b, 0x0c, 0x0d})(m)
	}
	for _, f := range mods {
		f(m)
	}
	return m
}

// Client personalities.
func oro(codes ...dhcpv6.OptionCode) dhcpv6.Modifier {
	return dhcpv6.WithRequestedOptions(codes...)
}

func bootORO() dhcpv6.Modifier {
	return oro(dhcpv6.OptionDNSRecursiveNameServer, dhcpv6.OptionBootfileURL, dhcpv6.OptionBootfileParam)
}

func vendorClass(s string) dhcpv6.Modifier {
	return dhcpv6.WithOption(&dhcpv6.OptVendorClass{EnterpriseNumber: 343, Data: [][]byte{[]byte(s)}})
}

// pxeEFI is UEFI PXE over IPv6 (EDK2): arch 7, its vendor class.
func pxeEFI() dhcpv6.Modifier {
	return func(d dhcpv6.DHCPv6) {
		m := d.(*dhcpv6.Message)
		bootORO()(m)
		dhcpv6.WithArchType(iana.EFI_X86_64)(m)
		vendorClass("PXEClient:Arch:00007:UNDI:003016")(m)
	}
}

// httpClient is UEFI HTTP boot over IPv6: arch 16, "HTTPClient".
func httpClient() dhcpv6.Modifier {
	return func(d dhcpv6.DHCPv6) {
		m := d.(*dhcpv6.Message)
		bootORO()(m)
		dhcpv6.WithArchType(iana.EFI_X86_64_HTTP)(m)
		vendorClass("HTTPClient:Arch:00016:UNDI:003001")(m)
	}
}

// ipxeClient is iPXE (BIOS): user class "iPXE", arch 0.
func ipxeClient() dhcpv6.Modifier {
	return func(d dhcpv6.DHCPv6) {
		m := d.(*dhcpv6.Message)
		bootORO()(m)
		dhcpv6.WithArchType(iana.INTEL_X86PC)(m)
		vendorClass("PXEClient:Arch:00000:UNDI:002001")(m)
		dhcpv6.WithUserClass([]byte("iPXE"))(m)
	}
}

func withServerID(d dhcpv6.DUID) dhcpv6.Modifier { return dhcpv6.WithServerID(d) }

// withAddr puts addr into the message's IA_NA.
func withAddr(a string) dhcpv6.Modifier {
	return dhcpv6.WithIANA(dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP(a)})
}

// relayed wraps m in a Relay-Forward from a relay on link fd00:a6::fe
// that saw the client at peer, with option 79 when lla is set.
func relayed(t testing.TB, m *dhcpv6.Message, peer netip.Addr, lla string) *dhcpv6.RelayMessage {
	t.Helper()
	r, err := dhcpv6.EncapsulateRelay(m, dhcpv6.MessageTypeRelayForward, net.ParseIP("fd00:a6::fe"), peer.AsSlice())
	if err != nil {
		t.Fatal(err)
	}
	r.AddOption(dhcpv6.OptInterfaceID([]byte("port7")))
	if lla != "" {
		r.AddOption(dhcpv6.OptClientLinkLayerAddress(iana.HWTypeEthernet, hw(t, lla)))
	}
	return r
}

// render is an answer (a Message or a Relay-Reply chain) as stable
// text, for golden files.
func render(d dhcpv6.DHCPv6) string {
	if d == nil {
		return "no answer\n"
	}
	var b strings.Builder
	renderInto(&b, d, "")
	return b.String()
}

func renderInto(b *strings.Builder, d dhcpv6.DHCPv6, indent string) {
	switch m := d.(type) {
	case *dhcpv6.RelayMessage:
		fmt.Fprintf(b, "%s%s hop %d link %s peer %s\n", indent, m.MessageType, m.HopCount, m.LinkAddr, m.PeerAddr)
		for _, o := range m.Options.Options {
			if o.Code() == dhcpv6.OptionRelayMsg {
				continue
			}
			fmt.Fprintf(b, "%s  %s\n", indent, o)
		}
		if inner := m.Options.RelayMessage(); inner != nil {
			renderInto(b, inner, indent+"  ")
		}
	case *dhcpv6.Message:
		fmt.Fprintf(b, "%s%s xid %s\n", indent, m.MessageType, m.TransactionID)
		for _, o := range m.Options.Options {
			renderOption(b, o, indent+"  ")
		}
	}
}

func renderOption(b *strings.Builder, o dhcpv6.Option, indent string) {
	switch o := o.(type) {
	case *dhcpv6.OptIANA:
		fmt.Fprintf(b, "%sIA_NA iaid %x t1 %v t2 %v\n", indent, o.IaId, o.T1, o.T2)
		for _, in := range o.Options.Options {
			renderOption(b, in, indent+"  ")
		}
	case *dhcpv6.OptIAAddress:
		fmt.Fprintf(b, "%sIA address %s preferred %v valid %v\n", indent, o.IPv6Addr, o.PreferredLifetime, o.ValidLifetime)
	default:
		fmt.Fprintf(b, "%s%s\n", indent, o)
	}
}
