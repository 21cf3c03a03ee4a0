package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// getLease runs DISCOVER and REQUEST for mac and returns the address.
func getLease(t *testing.T, s *Server, mac string, mods ...dhcpv4.Modifier) netip.Addr {
	t.Helper()
	offer := reply(t, s, msg(t, dhcpv4.MessageTypeDiscover, mac, mods...))
	if offer == nil || offer.MessageType() != dhcpv4.MessageTypeOffer {
		t.Fatalf("DISCOVER from %s: answer %v, want an OFFER", mac, offer)
	}
	yi := offer.YourIPAddr.String()
	ack := reply(t, s, msg(t, dhcpv4.MessageTypeRequest, mac, append(mods, serverID("192.0.2.1"), requested(yi))...))
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck || ack.YourIPAddr.String() != yi {
		t.Fatalf("REQUEST %s from %s: answer %v, want an ACK of it", yi, mac, ack)
	}
	return netip.MustParseAddr(yi)
}

func reply(t *testing.T, s *Server, req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	t.Helper()
	rep, err := s.Reply(context.Background(), req)
	if err != nil {
		t.Fatalf("Reply(%s from %s): %v", req.MessageType(), req.ClientHWAddr, err)
	}
	return rep
}

func wantType(t *testing.T, rep *dhcpv4.DHCPv4, want dhcpv4.MessageType) {
	t.Helper()
	if rep == nil {
		t.Fatalf("no answer, want %s", want)
	}
	if got := rep.MessageType(); got != want {
		t.Fatalf("answer %s (%q), want %s", got, rep.Message(), want)
	}
}

func TestSameMACGetsSameAddress(t *testing.T) {
	s, _, _ := newTestServer(t, Authoritative)
	a := getLease(t, s, macA)
	b := getLease(t, s, macB)
	if a == b {
		t.Fatalf("two clients got %v", a)
	}
	if again := getLease(t, s, macA); again != a {
		t.Errorf("second lease of %s = %v, want %v", macA, again, a)
	}
	// After a release the client still gets its address back.
	rel := msg(t, dhcpv4.MessageTypeRelease, macA, serverID("192.0.2.1"), dhcpv4.WithClientIP(a.AsSlice()))
	if rep := reply(t, s, rel); rep != nil {
		t.Fatalf("RELEASE answered with %s", rep.MessageType())
	}
	if len(s.Leases()) != 1 {
		t.Errorf("Leases after release = %v, want only %s's", s.Leases(), macB)
	}
	if again := getLease(t, s, macA); again != a {
		t.Errorf("lease of %s after release = %v, want %v", macA, again, a)
	}
}

func TestReservation(t *testing.T) {
	s, _, _ := newTestServer(t, Authoritative)
	if got := getLease(t, s, macReserve, pxeBIOS()); got != netip.MustParseAddr("192.0.2.50") {
		t.Fatalf("reserved client got %v, want 192.0.2.50", got)
	}
	if got := getLease(t, s, macA); got != netip.MustParseAddr("192.0.2.100") {
		t.Errorf("pool client got %v, want the pool's first address", got)
	}
	// A REQUEST for another address than the reservation is refused.
	rep := reply(t, s, msg(t, dhcpv4.MessageTypeRequest, macReserve, requested("192.0.2.101")))
	wantType(t, rep, dhcpv4.MessageTypeNak)

	// A reservation leased to another client is not offered twice.
	s2, _, _ := newTestServer(t, Authoritative, func(o *Options) {
		o.Decider = DeciderFunc(func(context.Context, Client) Decision {
			return Decision{Address: netip.MustParseAddr("192.0.2.60")}
		})
	})
	getLease(t, s2, macA)
	_, err := s2.Reply(context.Background(), msg(t, dhcpv4.MessageTypeDiscover, macB))
	if !errors.Is(err, ErrAddressInUse) {
		t.Errorf("DISCOVER for a reservation leased to another client: err %v, want ErrAddressInUse", err)
	}
}

func TestPoolExhaustion(t *testing.T) {
	s, _, _ := newTestServer(t, Authoritative)
	macs := []string{"52:54:00:00:01:01", "52:54:00:00:01:02", "52:54:00:00:01:03", "52:54:00:00:01:04"}
	seen := map[netip.Addr]bool{}
	for _, m := range macs {
		seen[getLease(t, s, m)] = true
	}
	if len(seen) != 4 {
		t.Fatalf("4 clients got %d addresses", len(seen))
	}
	rep, err := s.Reply(context.Background(), msg(t, dhcpv4.MessageTypeDiscover, macA))
	if rep != nil || !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("5th client: answer %v, err %v; want no answer and ErrPoolExhausted", rep, err)
	}
	if !strings.Contains(err.Error(), macA) || !strings.Contains(err.Error(), "192.0.2.100..192.0.2.103") {
		t.Errorf("error %q does not name the client and the pool", err)
	}
	if got := counterValue(t, s.metrics.exhausted); got != 1 {
		t.Errorf("pool exhausted counter = %v, want 1", got)
	}
}

func TestLeaseTableLimit(t *testing.T) {
	s, _, _ := newTestServer(t, Authoritative, func(o *Options) { o.MaxLeases = 2 })
	getLease(t, s, macA)
	getLease(t, s, macB)
	if _, err := s.Reply(context.Background(), msg(t, dhcpv4.MessageTypeDiscover, macC)); !errors.Is(err, ErrPoolExhausted) {
		t.Errorf("3rd client with MaxLeases 2: err %v, want ErrPoolExhausted", err)
	}
}

func TestLeaseRenewalAndExpiry(t *testing.T) {
	s, clk, _ := newTestServer(t, Authoritative)
	a := getLease(t, s, macA)
	clk.Advance(40 * time.Minute)
	renew := msg(t, dhcpv4.MessageTypeRequest, macA, dhcpv4.WithClientIP(a.AsSlice()))
	rep := reply(t, s, renew)
	wantType(t, rep, dhcpv4.MessageTypeAck)
	if rep.YourIPAddr.String() != a.String() || rep.IPAddressLeaseTime(0) != time.Hour {
		t.Errorf("renewal ACK: yiaddr %v lease %v, want %v for 1h", rep.YourIPAddr, rep.IPAddressLeaseTime(0), a)
	}
	if l := s.Leases(); len(l) != 1 || !l[0].Expires.Equal(clk.Now().Add(time.Hour)) || !l[0].Bound {
		t.Errorf("Leases after renewal = %+v, want one bound until now+1h", l)
	}

	// Fill the rest of the pool, let macA's lease run out while the
	// others renew: a new client gets macA's address.
	others := []string{"52:54:00:00:01:01", "52:54:00:00:01:02", "52:54:00:00:01:03"}
	for _, m := range others {
		getLease(t, s, m)
	}
	clk.Advance(61 * time.Minute)
	for _, m := range others {
		getLease(t, s, m)
	}
	if got := getLease(t, s, macB); got != a {
		t.Fatalf("new client got %v, want the expired lease's %v", got, a)
	}
	// macA's late renewal is refused: its address is macB's now.
	rep = reply(t, s, msg(t, dhcpv4.MessageTypeRequest, macA, dhcpv4.WithClientIP(a.AsSlice())))
	wantType(t, rep, dhcpv4.MessageTypeNak)
}

func TestOfferHeldThenFreed(t *testing.T) {
	s, clk, _ := newTestServer(t, Authoritative, func(o *Options) {
		o.PoolEnd = o.PoolStart // one address
	})
	wantType(t, reply(t, s, msg(t, dhcpv4.MessageTypeDiscover, macA)), dhcpv4.MessageTypeOffer)
	if _, err := s.Reply(context.Background(), msg(t, dhcpv4.MessageTypeDiscover, macB)); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("address offered to %s went to %s too (err %v)", macA, macB, err)
	}
	clk.Advance(DefaultOfferHold + time.Second)
	wantType(t, reply(t, s, msg(t, dhcpv4.MessageTypeDiscover, macB)), dhcpv4.MessageTypeOffer)

	// A client that takes another server's offer frees ours at once.
	s, _, _ = newTestServer(t, Authoritative, func(o *Options) { o.PoolEnd = o.PoolStart })
	reply(t, s, msg(t, dhcpv4.MessageTypeDiscover, macA))
	if rep := reply(t, s, msg(t, dhcpv4.MessageTypeRequest, macA, serverID("192.0.2.9"), requested("198.51.100.5"))); rep != nil {
		t.Fatalf("REQUEST to another server answered: %s", rep.MessageType())
	}
	wantType(t, reply(t, s, msg(t, dhcpv4.MessageTypeDiscover, macB)), dhcpv4.MessageTypeOffer)
}

func TestDecline(t *testing.T) {
	s, clk, _ := newTestServer(t, Authoritative)
	a := getLease(t, s, macA)
	dec := msg(t, dhcpv4.MessageTypeDecline, macA, serverID("192.0.2.1"), requested(a.String()))
	if rep := reply(t, s, dec); rep != nil {
		t.Fatalf("DECLINE answered with %s", rep.MessageType())
	}
	b := getLease(t, s, macA)
	if b == a {
		t.Fatalf("declined address %v offered again", a)
	}
	// Another client cannot have it either, until DeclineHold passed.
	for _, m := range []string{"52:54:00:00:01:01", "52:54:00:00:01:02"} {
		if got := getLease(t, s, m); got == a {
			t.Fatalf("declined address %v leased to %s", a, m)
		}
	}
	if _, err := s.Reply(context.Background(), msg(t, dhcpv4.MessageTypeDiscover, macB)); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("pool with a declined address: err %v, want ErrPoolExhausted", err)
	}
	clk.Advance(DefaultDeclineHold)
	if got := getLease(t, s, macB); got != a {
		t.Errorf("after DeclineHold %s got %v, want the declined %v", macB, got, a)
	}
}

func TestNAKs(t *testing.T) {
	cases := []struct {
		name string
		prep func(t *testing.T, s *Server)
		req  func(t *testing.T) *dhcpv4.DHCPv4
		why  string
	}{
		{"selecting an address not offered", func(t *testing.T, s *Server) {
			reply(t, s, msg(t, dhcpv4.MessageTypeDiscover, macA))
		}, func(t *testing.T) *dhcpv4.DHCPv4 {
			return msg(t, dhcpv4.MessageTypeRequest, macA, serverID("192.0.2.1"), requested("192.0.2.103"))
		}, "not offered"},
		{"selecting without a requested address", nil, func(t *testing.T) *dhcpv4.DHCPv4 {
			return msg(t, dhcpv4.MessageTypeRequest, macA, serverID("192.0.2.1"))
		}, "no requested address"},
		{"init-reboot on another network", nil, func(t *testing.T) *dhcpv4.DHCPv4 {
			return msg(t, dhcpv4.MessageTypeRequest, macA, requested("10.1.2.3"))
		}, "not on this network"},
		{"init-reboot outside the pool", nil, func(t *testing.T) *dhcpv4.DHCPv4 {
			return msg(t, dhcpv4.MessageTypeRequest, macA, requested("192.0.2.20"))
		}, "not an address of this server"},
		{"init-reboot with another client's address", func(t *testing.T, s *Server) {
			getLease(t, s, macB)
		}, func(t *testing.T) *dhcpv4.DHCPv4 {
			return msg(t, dhcpv4.MessageTypeRequest, macA, requested("192.0.2.100"))
		}, "leased to"},
		{"renewing another client's address", func(t *testing.T, s *Server) {
			getLease(t, s, macB)
		}, func(t *testing.T) *dhcpv4.DHCPv4 {
			return msg(t, dhcpv4.MessageTypeRequest, macA, dhcpv4.WithClientIP(net.ParseIP("192.0.2.100")))
		}, "leased to"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newTestServer(t, Authoritative)
			if tc.prep != nil {
				tc.prep(t, s)
			}
			rep := reply(t, s, tc.req(t))
			wantType(t, rep, dhcpv4.MessageTypeNak)
			if !strings.Contains(rep.Message(), tc.why) {
				t.Errorf("NAK message %q, want it to say %q", rep.Message(), tc.why)
			}
			if !isZero(rep.YourIPAddr) || rep.Options.Has(dhcpv4.OptionBootfileName) {
				t.Errorf("NAK carries yiaddr %v or a boot file", rep.YourIPAddr)
			}
		})
	}
}

func TestStageRecords(t *testing.T) {
	s, clk, rec := newTestServer(t, Authoritative)
	a := getLease(t, s, macA, pxeBIOS())
	at := clk.Now()
	want := []stage.Record{
		{Node: "node-0a", MAC: macA, Stage: stage.DHCPDiscover, Arch: "bios", At: at},
		{Node: "node-0a", MAC: macA, Stage: stage.DHCPOffer, Addr: a.String(), Arch: "bios", File: "undionly.kpxe", At: at},
		{Node: "node-0a", MAC: macA, Stage: stage.DHCPAck, Addr: a.String(), Arch: "bios", File: "undionly.kpxe", At: at},
	}
	got := rec.Records()
	if len(got) != len(want) {
		t.Fatalf("records %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if p := got[1].Phrase(); p != "DHCP offered 192.0.2.100, boot file undionly.kpxe" {
		t.Errorf("offer phrase %q", p)
	}
}

func TestMetricsCount(t *testing.T) {
	s, _, _ := newTestServer(t, Authoritative)
	getLease(t, s, macA)
	reply(t, s, msg(t, dhcpv4.MessageTypeDiscover, macIgnored))
	reply(t, s, msg(t, dhcpv4.MessageTypeRequest, macB, requested("10.0.0.1")))
	for name, c := range map[string]struct {
		got  float64
		want float64
	}{
		"requests discover": {counterValue(t, s.metrics.requests.WithLabelValues("discover")), 2},
		"requests request":  {counterValue(t, s.metrics.requests.WithLabelValues("request")), 2},
		"answers offer":     {counterValue(t, s.metrics.answers.WithLabelValues("offer")), 1},
		"answers ack":       {counterValue(t, s.metrics.answers.WithLabelValues("ack")), 1},
		"answers nak":       {counterValue(t, s.metrics.answers.WithLabelValues("nak")), 1},
		"ignored decider":   {counterValue(t, s.metrics.ignored.WithLabelValues(ignoreDecider)), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	if n := collectCount(s.Metrics()); n < 10 {
		t.Errorf("Metrics() collects %d series, want the pre-made label values too", n)
	}
}

func TestDecisionErrors(t *testing.T) {
	long := "http://192.0.2.1/" + strings.Repeat("a", MaxBootFileLen)
	cases := []struct {
		field string
		d     Decision
		http  bool // the client is a UEFI HTTP boot one
	}{
		{"BootFile", Decision{BootFile: "ipxe.efi"}, true},
		{"BootFile", Decision{BootFile: long}, false},
		{"Address", Decision{Address: netip.MustParseAddr("198.51.100.1")}, false},
		{"Address", Decision{Address: netip.MustParseAddr("192.0.2.255")}, false},
		{"Address", Decision{Address: serverIP}, false},
		{"NextServer", Decision{NextServer: netip.MustParseAddr("2001:db8::1"), BootFile: "x"}, false},
		{"Hostname", Decision{Hostname: strings.Repeat("h", 64)}, false},
	}
	for _, tc := range cases {
		s, _, _ := newTestServer(t, Authoritative, func(o *Options) {
			o.Decider = DeciderFunc(func(context.Context, Client) Decision { return tc.d })
		})
		var mods []dhcpv4.Modifier
		if tc.http {
			mods = append(mods, httpClient())
		}
		rep, err := s.Reply(context.Background(), msg(t, dhcpv4.MessageTypeDiscover, macA, mods...))
		var de *DecisionError
		if rep != nil || !errors.As(err, &de) || de.Field != tc.field || de.MAC != macA {
			t.Errorf("decision %+v: answer %v err %v, want a DecisionError on %s", tc.d, rep, err, tc.field)
		}
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

func collectCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}

// TestConcurrentClients leases to many clients at once (run with -race):
// every client gets its own address.
func TestConcurrentClients(t *testing.T) {
	s, _, _ := newTestServer(t, Authoritative, func(o *Options) {
		o.PoolStart, o.PoolEnd = netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.250")
	})
	const n = 100
	got := make([]netip.Addr, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			mac := fmt.Sprintf("52:54:02:00:00:%02x", i)
			offer, err := s.Reply(context.Background(), msg(t, dhcpv4.MessageTypeDiscover, mac))
			if err != nil || offer == nil {
				t.Errorf("%s: DISCOVER: %v", mac, err)
				return
			}
			ack, err := s.Reply(context.Background(), msg(t, dhcpv4.MessageTypeRequest, mac, serverID("192.0.2.1"), requested(offer.YourIPAddr.String())))
			if err != nil || ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
				t.Errorf("%s: REQUEST: %v %v", mac, ack, err)
				return
			}
			got[i] = netip.MustParseAddr(ack.YourIPAddr.String())
		})
	}
	wg.Wait()
	seen := map[netip.Addr]bool{}
	for _, a := range got {
		if seen[a] {
			t.Errorf("%v leased twice", a)
		}
		seen[a] = true
	}
	if l := s.Leases(); len(l) != n {
		t.Errorf("%d leases, want %d", len(l), n)
	}
}

func TestProxyStageRecords(t *testing.T) {
	s, _, rec := newTestServer(t, Proxy)
	wantType(t, reply(t, s, msg(t, dhcpv4.MessageTypeDiscover, macA, pxeBIOS())), dhcpv4.MessageTypeOffer)
	ack, err := s.Reply(OnPXEPort(context.Background()),
		msg(t, dhcpv4.MessageTypeRequest, macA, pxeBIOS(), dhcpv4.WithClientIP(net.ParseIP("192.0.2.160"))))
	if err != nil {
		t.Fatal(err)
	}
	wantType(t, ack, dhcpv4.MessageTypeAck)
	var phrases []string
	for _, r := range rec.Records() {
		phrases = append(phrases, r.Phrase())
	}
	want := []string{
		"DHCP discover from 52:54:00:00:00:0a (bios)",
		"proxyDHCP offered boot file undionly.kpxe",
		"DHCP acknowledged 192.0.2.160",
	}
	if strings.Join(phrases, "|") != strings.Join(want, "|") {
		t.Errorf("phrases %q, want %q", phrases, want)
	}
}
