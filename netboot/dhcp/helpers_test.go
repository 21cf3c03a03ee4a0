package dhcp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
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
	serverIP = netip.MustParseAddr("192.0.2.1")
	subnet   = netip.MustParsePrefix("192.0.2.0/24")
)

// Test MACs: the Decider knows macBIOS... as node-1; macIgnored is
// ignored; macNoBoot gets no boot file.
const (
	macA       = "52:54:00:00:00:0a"
	macB       = "52:54:00:00:00:0b"
	macC       = "52:54:00:00:00:0c"
	macIgnored = "52:54:00:00:00:ff"
	macNoBoot  = "52:54:00:00:00:ee"
	macReserve = "52:54:00:00:00:50"
)

// testDecider boots by architecture, as the boot server's decider does.
func testDecider(_ context.Context, c Client) Decision {
	switch c.MAC {
	case macIgnored:
		return Decision{Ignore: true}
	case macNoBoot:
		return Decision{}
	}
	d := Decision{Node: "node-" + c.MAC[len(c.MAC)-2:]}
	if c.MAC == macReserve {
		d.Address = netip.MustParseAddr("192.0.2.50")
		d.Hostname = "reserved"
	}
	switch {
	case c.IPXE:
		d.BootFile = "http://192.0.2.1:8080/boot/" + c.MAC + "/boot.ipxe"
	case c.HTTPClient:
		d.BootFile = "http://192.0.2.1:8080/ipxe/ipxe.efi"
	case c.Arch == ArchBIOS:
		d.BootFile = "undionly.kpxe"
	case c.Arch.UEFI():
		d.BootFile = "snponly.efi"
	}
	return d
}

type serverOpt func(*Options)

func newTestServer(t testing.TB, mode Mode, opts ...serverOpt) (*Server, *manualClock, *stage.Recorder) {
	t.Helper()
	clk, rec := newManualClock(), &stage.Recorder{}
	o := Options{
		Mode:      mode,
		ServerIP:  serverIP,
		Subnet:    subnet,
		PoolStart: netip.MustParseAddr("192.0.2.100"),
		PoolEnd:   netip.MustParseAddr("192.0.2.103"),
		Router:    serverIP,
		DNS:       []netip.Addr{netip.MustParseAddr("192.0.2.53")},
		Decider:   DeciderFunc(testDecider),
		Observer:  rec,
		Clock:     clk,
		Logger:    slog.New(slog.DiscardHandler),
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

func mustMAC(t testing.TB, s string) net.HardwareAddr {
	t.Helper()
	hw, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return hw
}

// msg builds a client message with a fixed transaction ID.
func msg(t testing.TB, mt dhcpv4.MessageType, mac string, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	base := []dhcpv4.Modifier{
		dhcpv4.WithTransactionID(dhcpv4.TransactionID{0xde, 0xad, 0xbe, 0xef}),
		dhcpv4.WithHwAddr(mustMAC(t, mac)),
		dhcpv4.WithHWType(iana.HWTypeEthernet),
		dhcpv4.WithMessageType(mt),
	}
	m, err := dhcpv4.New(append(base, mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Client personalities.
func pxeBIOS() dhcpv4.Modifier {
	return func(d *dhcpv4.DHCPv4) {
		d.UpdateOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001"))
		d.UpdateOption(dhcpv4.OptClientArch(iana.INTEL_X86PC))
	}
}

func pxeEFI() dhcpv4.Modifier {
	return func(d *dhcpv4.DHCPv4) {
		d.UpdateOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003016"))
		d.UpdateOption(dhcpv4.OptClientArch(iana.EFI_X86_64))
	}
}

func ipxeClient() dhcpv4.Modifier {
	return func(d *dhcpv4.DHCPv4) {
		d.UpdateOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001"))
		d.UpdateOption(dhcpv4.OptClientArch(iana.INTEL_X86PC))
		d.UpdateOption(dhcpv4.OptUserClass("iPXE"))
		d.UpdateOption(dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(optionIPXEEncapsulated), []byte{0xb1, 0x05, 0x01, 0x80, 0x86, 0x10, 0x0e}))
	}
}

func httpClient() dhcpv4.Modifier {
	return func(d *dhcpv4.DHCPv4) {
		d.UpdateOption(dhcpv4.OptClassIdentifier("HTTPClient:Arch:00016:UNDI:003001"))
		d.UpdateOption(dhcpv4.OptClientArch(iana.EFI_X86_64_HTTP))
	}
}

func requested(a string) dhcpv4.Modifier {
	return dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP(a)))
}

func serverID(a string) dhcpv4.Modifier {
	return dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP(a)))
}

// render is an answer as stable text, for golden files.
func render(m *dhcpv4.DHCPv4) string {
	if m == nil {
		return "no answer\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "op %v  xid %s  flags %s\n", m.OpCode, m.TransactionID, m.FlagsToString())
	fmt.Fprintf(&b, "chaddr %s\n", m.ClientHWAddr)
	fmt.Fprintf(&b, "ciaddr %s  yiaddr %s  siaddr %s  giaddr %s\n", m.ClientIPAddr, m.YourIPAddr, m.ServerIPAddr, m.GatewayIPAddr)
	fmt.Fprintf(&b, "sname %q\nfile %q\n", m.ServerHostName, m.BootFileName)
	codes := make([]int, 0, len(m.Options))
	for c := range m.Options {
		codes = append(codes, int(c))
	}
	slices.Sort(codes)
	for _, c := range codes {
		v := m.Options[uint8(c)]
		fmt.Fprintf(&b, "option %3d %-24s %s\n", c, optionNames[uint8(c)], optionText(uint8(c), v))
	}
	return b.String()
}

func optionText(code uint8, v []byte) string {
	switch code {
	case 1, 3, 6, 54:
		var ips []string
		for i := 0; i+4 <= len(v); i += 4 {
			ips = append(ips, net.IP(v[i:i+4]).String())
		}
		return strings.Join(ips, " ")
	case 51, 58, 59:
		if len(v) == 4 {
			return fmt.Sprint(time.Duration(uint32(v[0])<<24|uint32(v[1])<<16|uint32(v[2])<<8|uint32(v[3])) * time.Second)
		}
	case 53:
		if len(v) == 1 {
			return dhcpv4.MessageType(v[0]).String()
		}
	case 12, 56, 60, 66, 67:
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("% x", v)
}

// optionNames names the options answers carry.
var optionNames = map[uint8]string{
	1: "subnet mask", 3: "router", 6: "dns", 12: "host name", 43: "vendor specific",
	51: "lease time", 53: "message type", 54: "server identifier", 56: "message",
	58: "renewal time", 59: "rebinding time", 60: "class identifier", 61: "client identifier",
	66: "tftp server name", 67: "bootfile name", 82: "relay agent information", 175: "ipxe encapsulated",
}
