package dhcp6

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func reply(t *testing.T, s *Server, m *dhcpv6.Message, src Source) *dhcpv6.Message {
	t.Helper()
	rep, err := s.Reply(context.Background(), m, src)
	if err != nil {
		t.Fatalf("Reply(%s): %v", m.MessageType, err)
	}
	return rep
}

func leasedAddr(t *testing.T, rep *dhcpv6.Message) netip.Addr {
	t.Helper()
	if rep == nil {
		t.Fatal("no answer")
	}
	ia := rep.Options.OneIANA()
	if ia == nil || ia.Options.OneAddress() == nil {
		t.Fatalf("no IA address in\n%s", render(rep))
	}
	a, _ := netip.AddrFromSlice(ia.Options.OneAddress().IPv6Addr)
	return a
}

// TestStatefulLifecycle takes iPXE (a DUID-UUID, MAC from its
// link-local address) through Solicit, Request, Renew and Release, then
// the ramdisk (a DUID-LLT, same MAC) gets the same address: leases are
// per machine. Every stage is recorded and counted.
func TestStatefulLifecycle(t *testing.T) {
	s, clk, rec := newTestServer(t, Stateful)
	src := direct(t, macA)
	us := withServerID(serverDUID)
	adv := reply(t, s, msg(t, dhcpv6.MessageTypeSolicit, duidUUID("ipxe"), ipxeClient()), src)
	if adv.MessageType != dhcpv6.MessageTypeAdvertise {
		t.Fatalf("answer %s, want ADVERTISE", adv.MessageType)
	}
	addr := leasedAddr(t, adv)
	if got := adv.Options.BootFileURL(); got != "http://[fd00:a6::1]:8080/boot/52-54-00-00-00-0a/boot.ipxe" {
		t.Errorf("boot file URL %q", got)
	}
	if l := s.Leases(); len(l) != 1 || l[0].Bound || l[0].Addr != addr {
		t.Errorf("after the advertise: leases %+v", l)
	}
	rep := reply(t, s, msg(t, dhcpv6.MessageTypeRequest, duidUUID("ipxe"), ipxeClient(), us), src)
	if got := leasedAddr(t, rep); got != addr {
		t.Errorf("request got %v, advertised %v", got, addr)
	}
	if l := s.Leases(); len(l) != 1 || !l[0].Bound || l[0].MAC != macA {
		t.Errorf("after the request: leases %+v", l)
	}
	clk.Advance(30 * time.Minute)
	rep = reply(t, s, msg(t, dhcpv6.MessageTypeRenew, duidUUID("ipxe"), us, withAddr(addr.String())), src)
	if got := leasedAddr(t, rep); got != addr {
		t.Errorf("renew got %v", got)
	}
	if l := s.Leases(); !l[0].Expires.Equal(clk.Now().Add(DefaultValidLifetime)) {
		t.Errorf("renewed lease expires %v, want %v", l[0].Expires, clk.Now().Add(DefaultValidLifetime))
	}
	rep = reply(t, s, msg(t, dhcpv6.MessageTypeRelease, duidUUID("ipxe"), us, withAddr(addr.String())), src)
	if st := rep.Options.Status(); st == nil || st.StatusCode != iana.StatusSuccess {
		t.Errorf("release answer %s", render(rep))
	}
	if l := s.Leases(); len(l) != 0 {
		t.Errorf("after the release: leases %+v", l)
	}
	// The ramdisk's dhclient: another DUID, the same machine.
	adv = reply(t, s, msg(t, dhcpv6.MessageTypeSolicit, duidLLT(t, macA)), src)
	if got := leasedAddr(t, adv); got != addr {
		t.Errorf("the same machine under another DUID got %v, want its %v", got, addr)
	}
	if adv.Options.BootFileURL() != "" {
		t.Errorf("a client that did not ask for option 59 got one:\n%s", render(adv))
	}
	var stages []string
	for _, r := range rec.Records() {
		stages = append(stages, string(r.Stage)+" "+r.Node+" "+r.Addr)
		if r.MAC != macA || r.Note == "" {
			t.Errorf("record %+v: want MAC %s and a DHCPv6 note", r, macA)
		}
	}
	want := []string{"dhcp discover node-0a ", "dhcp offer node-0a fd00:a6::100", "dhcp ack node-0a fd00:a6::100",
		"dhcp ack node-0a fd00:a6::100", "dhcp discover node-0a ", "dhcp offer node-0a fd00:a6::100"}
	if strings.Join(stages, "|") != strings.Join(want, "|") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(stages, "\n"), strings.Join(want, "\n"))
	}
	for label, want := range map[string]float64{"solicit": 2, "request": 1, "renew": 1, "release": 1} {
		if got := counterValue(t, s.metrics.requests.WithLabelValues(label)); got != want {
			t.Errorf("requests{type=%s} = %v, want %v", label, got, want)
		}
	}
	if got := counterValue(t, s.metrics.answers.WithLabelValues("reply")); got != 3 {
		t.Errorf("answers{type=reply} = %v, want 3", got)
	}
	if got := counterValue(t, s.metrics.macFrom.WithLabelValues(string(MACFromLinkLocal))); got != 4 {
		t.Errorf("client_mac{source=link-local-eui64} = %v, want 4", got)
	}
}

// TestNoMACIsNeverGuessed: a relayed client with a DUID-UUID, no option
// 79 and a global peer address gets nothing, and is counted; after Learn
// it is served.
func TestNoMACIsNeverGuessed(t *testing.T) {
	s, _, rec := newTestServer(t, Stateful)
	m := msg(t, dhcpv6.MessageTypeSolicit, duidUUID("os"), ipxeClient())
	src := Source{Peer: netip.MustParseAddr("fd00:a6::fe"), Relays: []Relay{{LinkAddr: netip.MustParseAddr("fd00:c8::1"), PeerAddr: netip.MustParseAddr("fd00:c8::77")}}}
	if rep := reply(t, s, m, src); rep != nil {
		t.Fatalf("answered a client without a MAC:\n%s", render(rep))
	}
	if got := counterValue(t, s.metrics.ignored.WithLabelValues(ignoreNoMAC)); got != 1 {
		t.Errorf("ignored{reason=no_mac} = %v, want 1", got)
	}
	if len(rec.Records()) != 0 {
		t.Errorf("records for a client without a MAC: %v", rec.Records())
	}
	if err := s.Learn(duidUUID("os").ToBytes(), "52-54-00-00-00-0B"); err != nil {
		t.Fatal(err)
	}
	if rep := reply(t, s, m, src); rep == nil || !strings.Contains(rep.Options.BootFileURL(), "52-54-00-00-00-0b") {
		t.Fatalf("after Learn: %s", render(rep))
	}
	if got := counterValue(t, s.metrics.macFrom.WithLabelValues(string(MACFromLearned))); got != 1 {
		t.Errorf("client_mac{source=learned} = %v, want 1", got)
	}
	for _, bad := range []struct {
		duid []byte
		mac  string
	}{{[]byte{0, 1}, macA}, {duidUUID("x").ToBytes(), "52:54:00:00:00"}, {duidUUID("x").ToBytes(), "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"}} {
		if err := s.Learn(bad.duid, bad.mac); err == nil {
			t.Errorf("Learn(%x, %q) accepted", bad.duid, bad.mac)
		}
	}
}

// TestPoolExhausted: with every address held, a new client's IA gets
// NoAddrsAvail (and the boot options), and the exhaustion is counted.
func TestPoolExhausted(t *testing.T) {
	s, _, _ := newTestServer(t, Stateful)
	for i := range 4 {
		mac := "52:54:00:00:01:0" + string(rune('0'+i))
		leasedAddr(t, reply(t, s, msg(t, dhcpv6.MessageTypeSolicit, duidLL(t, mac)), direct(t, mac)))
	}
	rep := reply(t, s, msg(t, dhcpv6.MessageTypeSolicit, duidLL(t, macA), pxeEFI()), direct(t, macA))
	ia := rep.Options.OneIANA()
	if ia == nil || ia.Options.Status() == nil || ia.Options.Status().StatusCode != iana.StatusNoAddrsAvail {
		t.Fatalf("fifth client:\n%s", render(rep))
	}
	if got := counterValue(t, s.metrics.exhausted); got != 1 {
		t.Errorf("pool_exhausted = %v, want 1", got)
	}
	if _, err := s.leases.offer(macA, netip.Addr{}, netip.Addr{}, s.opts.Clock.Now()); !errors.Is(err, ErrPoolExhausted) {
		t.Errorf("offer: %v, want ErrPoolExhausted", err)
	}
}

// TestDecisionErrors: a decision the server cannot send is an error
// naming the MAC, the node and the field, and no answer.
func TestDecisionErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		d     Decision
		c     dhcpv6.Modifier
		field string
	}{
		{"tftp to HTTP boot", Decision{Node: "n1", BootFileURL: "tftp://[fd00:a6::1]/snponly.efi"}, httpClient(), "BootFileURL"},
		{"not a URL", Decision{Node: "n1", BootFileURL: "snponly.efi"}, pxeEFI(), "BootFileURL"},
		{"too long", Decision{Node: "n1", BootFileURL: "http://[fd00:a6::1]/" + strings.Repeat("a", 1100)}, pxeEFI(), "BootFileURL"},
		{"does not fit the MTU", Decision{Node: "n1", BootFileURL: "http://[fd00:a6::1]/" + strings.Repeat("a", 1000), BootFileParams: []string{strings.Repeat("b", 300)}}, pxeEFI(), "BootFileURL"},
		{"reservation off the prefix", Decision{Node: "n1", Address: netip.MustParseAddr("fd00:b7::5")}, pxeEFI(), "Address"},
		{"reservation is the server", Decision{Node: "n1", Address: serverAddr}, pxeEFI(), "Address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newTestServer(t, Stateful, func(o *Options) {
				o.Decider = DeciderFunc(func(context.Context, Client) Decision { return tc.d })
			})
			rep, err := s.Reply(context.Background(), msg(t, dhcpv6.MessageTypeSolicit, duidLL(t, macA), tc.c), direct(t, macA))
			var de *DecisionError
			if rep != nil || !errors.As(err, &de) || de.Field != tc.field || de.MAC != macA {
				t.Fatalf("Reply = %v, %v; want a DecisionError on %s for %s", rep, err, tc.field, macA)
			}
		})
	}
}

// TestConfigErrors: each invalid Options field is named.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		field string
		mod   func(*Options)
	}{
		{"Mode", func(o *Options) { o.Mode = "stateless" }},
		{"ServerDUID", func(o *Options) { o.ServerDUID, o.ServerAddr = nil, netip.Addr{} }},
		{"ServerAddr", func(o *Options) { o.ServerAddr = netip.MustParseAddr("fe80::1") }},
		{"ServerAddr", func(o *Options) { o.ServerAddr = netip.MustParseAddr("192.0.2.1") }},
		{"Decider", func(o *Options) { o.Decider = nil }},
		{"Prefix", func(o *Options) { o.Prefix = netip.MustParsePrefix("fd00:a6::/48") }},
		{"Prefix", func(o *Options) { o.Prefix = netip.MustParsePrefix("192.0.2.0/24") }},
		{"PoolStart", func(o *Options) { o.PoolStart = netip.MustParseAddr("fd00:b7::100") }},
		{"PoolEnd", func(o *Options) { o.PoolEnd = netip.MustParseAddr("fd00:a6::ff") }},
		{"PoolEnd", func(o *Options) { o.PoolEnd = netip.MustParseAddr("fd00:a6::1:0:0") }},
		{"PoolStart", func(o *Options) { o.ServerAddr = netip.MustParseAddr("fd00:a6::101") }},
		{"DNS[0]", func(o *Options) { o.DNS = []netip.Addr{netip.MustParseAddr("192.0.2.53")} }},
		{"PreferredLifetime", func(o *Options) { o.PreferredLifetime = 3 * time.Hour }},
		{"ValidLifetime", func(o *Options) { o.ValidLifetime = time.Second }},
		{"MaxPacketSize", func(o *Options) { o.MaxPacketSize = 576 }},
		{"Workers", func(o *Options) { o.Workers = 65 }},
		{"Interface", func(o *Options) { o.Interface = "a-very-long-interface" }},
	} {
		o := Options{Mode: Stateful, ServerAddr: serverAddr, Prefix: prefix,
			PoolStart: netip.MustParseAddr("fd00:a6::100"), PoolEnd: netip.MustParseAddr("fd00:a6::1ff"),
			Decider: DeciderFunc(testDecider)}
		tc.mod(&o)
		_, err := New(o)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: New = %v, want a ConfigError on %s", tc.field, err, tc.field)
		}
	}
	// Proxy mode needs no pool; the DUID derived from the address is
	// stable.
	a, err := New(Options{Mode: Proxy, ServerAddr: serverAddr, Decider: DeciderFunc(testDecider)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New(Options{Mode: Proxy, ServerAddr: serverAddr, Decider: DeciderFunc(testDecider)})
	if !a.ServerDUID().Equal(b.ServerDUID()) || a.ServerDUID().DUIDType() != dhcpv6.DUID_UUID {
		t.Errorf("derived DUIDs %v and %v: want the same DUID-UUID", a.ServerDUID(), b.ServerDUID())
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
