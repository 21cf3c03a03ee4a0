package dhcp

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/iana"
	"go.uber.org/goleak"
)

func pxeEFIModifiers() []dhcpv4.Modifier {
	return []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003016")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)),
	}
}

// TestNetnsAuthoritative runs Serve bound to a veth in one namespace and
// nclient4 in another through DISCOVER, OFFER, REQUEST, ACK.
func TestNetnsAuthoritative(t *testing.T) {
	p := newVethPair(t)
	rec := &stage.Recorder{}
	srv, err := New(Options{
		Mode: Authoritative, Interface: p.serverIf, ServerIP: serverIP, Subnet: subnet,
		PoolStart: netip.MustParseAddr("192.0.2.100"), PoolEnd: netip.MustParseAddr("192.0.2.199"),
		Router: serverIP, DNS: []netip.Addr{netip.MustParseAddr("192.0.2.53")},
		Decider: DeciderFunc(testDecider), Observer: rec, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	serveInNetns(t, srv, p.serverNS)

	var client *nclient4.Client
	if err := inNetns(p.clientNS, func() (err error) {
		client, err = nclient4.New(p.clientIf, nclient4.WithTimeout(500*time.Millisecond), nclient4.WithRetry(20))
		return err
	}); err != nil {
		t.Fatalf("nclient4 in %s: %v", p.clientNS, err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := client.Request(ctx, pxeEFIModifiers()...)
	if err != nil {
		t.Fatalf("DHCP exchange: %v", err)
	}
	ack := l.ACK
	if got := ack.YourIPAddr.String(); got != "192.0.2.100" {
		t.Errorf("yiaddr %s, want 192.0.2.100", got)
	}
	checks := map[string][2]string{
		"server id":   {ack.ServerIdentifier().String(), "192.0.2.1"},
		"subnet mask": {net.IP(ack.SubnetMask()).String(), "255.255.255.0"},
		"router":      {ipsText(ack.Router()), "192.0.2.1"},
		"dns":         {ipsText(ack.DNS()), "192.0.2.53"},
		"lease time":  {ack.IPAddressLeaseTime(0).String(), "1h0m0s"},
		"siaddr":      {ack.ServerIPAddr.String(), "192.0.2.1"},
		"file":        {ack.BootFileName, "snponly.efi"},
		"option 67":   {ack.BootFileNameOption(), "snponly.efi"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("ACK %s = %q, want %q", name, c[0], c[1])
		}
	}
	var stages []stage.Stage
	for _, r := range rec.Records() {
		stages = append(stages, r.Stage)
	}
	if len(stages) < 3 || stages[0] != stage.DHCPDiscover || stages[len(stages)-1] != stage.DHCPAck {
		t.Errorf("stages %v, want discover, offer, ack", stages)
	}
}

// TestNetnsProxy runs Serve in proxy mode: the OFFER to a PXE client
// carries no address and the PXE options, and the ProxyDHCPREQUEST to
// port 4011 gets an ACK.
func TestNetnsProxy(t *testing.T) {
	p := newVethPair(t)
	srv, err := New(Options{Mode: Proxy, Interface: p.serverIf, ServerIP: serverIP,
		Decider: DeciderFunc(testDecider), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	serveInNetns(t, srv, p.serverNS)

	var client *nclient4.Client
	if err := inNetns(p.clientNS, func() (err error) {
		client, err = nclient4.New(p.clientIf, nclient4.WithTimeout(500*time.Millisecond), nclient4.WithRetry(20))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offer, err := client.DiscoverOffer(ctx, pxeEFIModifiers()...)
	if err != nil {
		t.Fatalf("proxy DISCOVER: %v", err)
	}
	if !isZero(offer.YourIPAddr) || offer.ClassIdentifier() != "PXEClient" || offer.BootFileName != "snponly.efi" ||
		string(offer.Options.Get(dhcpv4.OptionVendorSpecificInformation)) != string(pxeDiscoveryControl) {
		t.Fatalf("proxy OFFER:\n%s", render(offer))
	}

	// The client got its address from the real DHCP server; it asks the
	// proxy for its boot file on port 4011.
	ipCmd(t, "-n", p.clientNS, "addr", "add", "192.0.2.160/24", "dev", p.clientIf)
	conn := udpInNetns(t, p.clientNS, "192.0.2.160:68")
	req := msg(t, dhcpv4.MessageTypeRequest, client.InterfaceAddr().String(), append(pxeEFIModifiers(),
		dhcpv4.WithClientIP(net.ParseIP("192.0.2.160")), serverID("192.0.2.1"))...)
	ack := exchange(t, conn, &net.UDPAddr{IP: net.ParseIP("192.0.2.1"), Port: PXEPort}, req)
	wantType(t, ack, dhcpv4.MessageTypeAck)
	if ack.BootFileName != "snponly.efi" || ack.ClientIPAddr.String() != "192.0.2.160" || !isZero(ack.YourIPAddr) {
		t.Errorf("ProxyDHCPACK:\n%s", render(ack))
	}
}

// exchange sends req to dst on conn and returns the first answer with
// req's transaction ID.
func exchange(t testing.TB, conn *net.UDPConn, dst *net.UDPAddr, req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	t.Helper()
	buf := make([]byte, 1500)
	for attempt := 0; attempt < 5; attempt++ {
		if _, err := conn.WriteTo(req.ToBytes(), dst); err != nil {
			t.Fatalf("send to %v: %v", dst, err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				break // timed out: send again
			}
			rep, err := dhcpv4.FromBytes(buf[:n])
			if err == nil && rep.TransactionID == req.TransactionID {
				return rep
			}
		}
	}
	t.Fatalf("no answer from %v", dst)
	return nil
}

// TestServeConnLoopback runs ServeConn on a loopback socket (no root
// needed) and checks it answers and that every goroutine stops with ctx.
func TestServeConnLoopback(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s, _, _ := newTestServer(t, Authoritative)
	sc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeConn(ctx, sc) }()

	cc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	dst := sc.LocalAddr().(*net.UDPAddr)
	offer := exchange(t, cc, dst, msg(t, dhcpv4.MessageTypeDiscover, macA, pxeBIOS()))
	wantType(t, offer, dhcpv4.MessageTypeOffer)
	ack := exchange(t, cc, dst, msg(t, dhcpv4.MessageTypeRequest, macA, serverID("192.0.2.1"), requested(offer.YourIPAddr.String())))
	wantType(t, ack, dhcpv4.MessageTypeAck)

	// Garbage and oversized packets are dropped, the server goes on.
	if _, err := cc.WriteTo([]byte("not dhcp"), dst); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.WriteTo(make([]byte, DefaultMaxPacketSize+100), dst); err != nil {
		t.Fatal(err)
	}
	wantType(t, exchange(t, cc, dst, msg(t, dhcpv4.MessageTypeDiscover, macB)), dhcpv4.MessageTypeOffer)
	// The workers read concurrently: the Offer can come back before the
	// worker that read the garbage counted it, so wait for the counts
	// (a hang-free bound, not a timing assertion).
	for _, reason := range []string{ignoreMalformed, ignoreTooBig} {
		c := s.metrics.ignored.WithLabelValues(reason)
		deadline := time.Now().Add(10 * time.Second)
		for counterValue(t, c) < 1 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := counterValue(t, c); got != 1 {
			t.Errorf("%s counter %v, want 1", reason, got)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeConn after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeConn did not return within 5s of its context ending")
	}
}

func TestServeConnReadError(t *testing.T) {
	s, _, _ := newTestServer(t, Authoritative)
	sc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	sc.Close()
	if err := s.ServeConn(context.Background(), sc); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ServeConn on a closed socket: %v, want net.ErrClosed", err)
	}
}

func TestServeNeedsInterface(t *testing.T) {
	s, _, _ := newTestServer(t, Authoritative)
	var ce *ConfigError
	if err := s.Serve(context.Background()); !errors.As(err, &ce) || ce.Field != "Interface" {
		t.Errorf("Serve without Interface: %v, want a ConfigError on Interface", err)
	}
}

func TestDestination(t *testing.T) {
	cases := []struct {
		name string
		req  func(*dhcpv4.DHCPv4)
		peer net.Addr
		want string
	}{
		{"relayed", func(d *dhcpv4.DHCPv4) { d.GatewayIPAddr = net.ParseIP("192.0.2.254").To4() },
			&net.UDPAddr{IP: net.ParseIP("192.0.2.254"), Port: 67}, "192.0.2.254:67"},
		{"client with an address", func(d *dhcpv4.DHCPv4) { d.ClientIPAddr = net.ParseIP("192.0.2.160").To4() },
			&net.UDPAddr{IP: net.ParseIP("192.0.2.160"), Port: 68}, "192.0.2.160:68"},
		{"client without one", func(*dhcpv4.DHCPv4) {},
			&net.UDPAddr{IP: net.IPv4zero, Port: 68}, "255.255.255.255:68"},
	}
	for _, tc := range cases {
		req := msg(t, dhcpv4.MessageTypeDiscover, macA, tc.req)
		if got := destination(req, tc.peer).String(); got != tc.want {
			t.Errorf("%s: destination %s, want %s", tc.name, got, tc.want)
		}
	}
}

func ipsText(ips []net.IP) string {
	var s []string
	for _, ip := range ips {
		s = append(s, ip.String())
	}
	return strings.Join(s, " ")
}
