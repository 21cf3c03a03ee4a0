package dhcp6

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/nclient6"
	"github.com/insomniacslk/dhcp/iana"
)

// serveLoopback runs s.ServeConn on [::1] (an ephemeral port) until the
// test ends and returns its address.
func serveLoopback(t *testing.T, s *Server) *net.UDPAddr {
	t.Helper()
	sc, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeConn(ctx, sc) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeConn: %v", err)
		}
		sc.Close()
	})
	return sc.LocalAddr().(*net.UDPAddr)
}

func loopbackClient(t *testing.T, server *net.UDPAddr, mac string) *nclient6.Client {
	t.Helper()
	cc, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Fatal(err)
	}
	c, err := nclient6.NewWithConn(cc, hw(t, mac), nclient6.WithBroadcastAddr(server),
		nclient6.WithTimeout(time.Second), nclient6.WithRetry(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestLoopbackStateful runs nclient6 (insomniacslk's client, a DUID-LLT
// with its MAC) against ServeConn over UDP on ::1 through Solicit,
// Advertise, Request and Reply, as a UEFI PXE client. No root needed.
func TestLoopbackStateful(t *testing.T) {
	s, _, rec := newTestServer(t, Stateful, func(o *Options) { o.Clock = nil })
	addr := serveLoopback(t, s)
	c := loopbackClient(t, addr, macA)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adv, err := c.Solicit(ctx, pxeEFI())
	if err != nil {
		t.Fatalf("solicit: %v", err)
	}
	rep, err := c.Request(ctx, adv, pxeEFI())
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if rep.MessageType != dhcpv6.MessageTypeReply {
		t.Fatalf("answer %s", rep.MessageType)
	}
	if got := leasedAddr(t, rep); got != netip.MustParseAddr("fd00:a6::100") {
		t.Errorf("leased %v", got)
	}
	if got := rep.Options.BootFileURL(); got != "tftp://[fd00:a6::1]/boot/52-54-00-00-00-0a/snponly.efi" {
		t.Errorf("boot file URL %q", got)
	}
	if dns := rep.Options.DNS(); len(dns) != 1 || !dns[0].Equal(net.ParseIP("fd00:a6::53")) {
		t.Errorf("DNS %v", dns)
	}
	if l := s.Leases(); len(l) != 1 || !l[0].Bound || l[0].MAC != macA {
		t.Errorf("leases %+v", l)
	}
	if n := len(rec.Records()); n != 3 {
		t.Errorf("%d records, want discover, offer, ack: %v", n, rec.Records())
	}
}

// TestLoopbackProxy: in proxy mode a UEFI HTTP boot client's Solicit
// gets an Advertise with the boot file URL and "HTTPClient" and no IA,
// and a plain client (no boot vendor class) gets nothing.
func TestLoopbackProxy(t *testing.T) {
	s, _, _ := newTestServer(t, Proxy, func(o *Options) { o.Clock = nil })
	addr := serveLoopback(t, s)
	c := loopbackClient(t, addr, macA)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adv, err := c.Solicit(ctx, httpClient())
	if err != nil {
		t.Fatalf("solicit: %v", err)
	}
	if adv.Options.OneIANA() != nil {
		t.Errorf("a proxy advertised an address:\n%s", render(adv))
	}
	if got := adv.Options.BootFileURL(); got != "http://[fd00:a6::1]:8080/boot/52-54-00-00-00-0a/snponly.efi" {
		t.Errorf("boot file URL %q", got)
	}
	if vc := adv.Options.VendorClass(343); len(vc) != 1 || string(vc[0]) != "HTTPClient" {
		t.Errorf("vendor class %q, want HTTPClient", vc)
	}
	short, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	if m, err := c.Solicit(short, dhcpv6.WithArchType(iana.INTEL_X86PC)); err == nil {
		t.Errorf("a client that is not a boot firmware got an answer:\n%s", render(m))
	}
}

// TestNetnsStateful runs Serve bound to a veth in one namespace and
// nclient6 on the other end (a direct client: its multicast Solicit
// reaches ff02::1:2, the answer goes back to its link-local address)
// through Solicit, Advertise, Request and Reply.
func TestNetnsStateful(t *testing.T) {
	p := newVethPair(t)
	s, _, rec := newTestServer(t, Stateful, func(o *Options) { o.Interface = p.serverIf; o.Clock = nil })
	serveInNetns(t, s, p.serverNS)
	var c *nclient6.Client
	// nclient6 binds the link-local address, which exists once the
	// kernel's duplicate address detection is done.
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := inNetns(p.clientNS, func() (err error) {
			c, err = nclient6.New(p.clientIf, nclient6.WithTimeout(500*time.Millisecond), nclient6.WithRetry(20))
			return err
		})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nclient6 in %s: %v", p.clientNS, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adv, err := c.Solicit(ctx, ipxeClient())
	if err != nil {
		t.Fatalf("solicit: %v", err)
	}
	rep, err := c.Request(ctx, adv, ipxeClient())
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if got := leasedAddr(t, rep); got != netip.MustParseAddr("fd00:a6::100") {
		t.Errorf("leased %v", got)
	}
	mac := c.InterfaceAddr().String()
	if want := "/boot/" + strings.ReplaceAll(mac, ":", "-") + "/boot.ipxe"; !strings.HasSuffix(rep.Options.BootFileURL(), want) {
		t.Errorf("boot file URL %q, want one ending %s", rep.Options.BootFileURL(), want)
	}
	if l := s.Leases(); len(l) != 1 || l[0].MAC != mac || !l[0].Bound {
		t.Errorf("leases %+v, want one bound to %s", l, mac)
	}
	if len(rec.Records()) < 3 {
		t.Errorf("records %v", rec.Records())
	}
}
